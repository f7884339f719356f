package dev.sandbox4j.runtime.internal.egress;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.security.GeneralSecurityException;
import java.util.List;
import javax.net.ssl.SNIHostName;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * Connections to the destinations a policy allowed: TCP to the first address that answers, and TLS
 * verified against the JDK's trust store (plus the extra trust file) for intercepted requests.
 */
final class Upstreams {
  private final int connectTimeout;
  private final UpstreamTrust upstreamTrust;

  Upstreams(int connectTimeout, UpstreamTrust upstreamTrust) {
    this.connectTimeout = connectTimeout;
    this.upstreamTrust = upstreamTrust;
  }

  /** A TCP connection to the first of the target's addresses that answers. */
  Socket open(PolicyCheck.Target target) throws IOException, Refusal {
    IOException last = null;
    for (InetAddress a : target.addresses()) {
      Socket s = new Socket();
      try {
        s.setTcpNoDelay(true);
        s.connect(new InetSocketAddress(a, target.port()), connectTimeout);
        return s;
      } catch (IOException e) {
        OpenSockets.closeQuietly(s);
        last = e;
      }
    }
    throw new Refusal(
        502,
        "sandbox4j egress proxy: cannot connect to "
            + target.host()
            + ":"
            + target.port()
            + ": "
            + (last instanceof SocketTimeoutException
                ? "timed out"
                : String.valueOf(last.getMessage())));
  }

  Socket openTls(PolicyCheck.Target target) throws IOException, Refusal {
    Socket plain = open(target);
    try {
      SSLSocket s =
          (SSLSocket)
              upstreamTrust.factory().createSocket(plain, target.host(), target.port(), true);
      SSLParameters p = s.getSSLParameters();
      p.setEndpointIdentificationAlgorithm("HTTPS");
      p.setApplicationProtocols(new String[] {"http/1.1"});
      if (RequestTargets.literal(target.host()) == null) {
        p.setServerNames(List.of(new SNIHostName(target.host())));
      }
      s.setSSLParameters(p);
      plain.setSoTimeout(connectTimeout);
      s.startHandshake();
      return s;
    } catch (IOException | GeneralSecurityException e) {
      OpenSockets.closeQuietly(plain);
      String why = e instanceof SocketTimeoutException ? "timed out" : e.getMessage();
      throw new Refusal(502, "sandbox4j egress proxy: TLS to " + target.host() + " failed: " + why);
    }
  }
}
