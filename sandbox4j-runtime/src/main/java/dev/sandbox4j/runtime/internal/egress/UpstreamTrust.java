package dev.sandbox4j.runtime.internal.egress;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.Arrays;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

/** The client TLS factory for upstream servers, rebuilt when the extra trust file changes. */
final class UpstreamTrust {
  private final Path file;

  /** Guarded by {@code this}. */
  private SSLSocketFactory factory;

  private String seen;

  UpstreamTrust(Path file) {
    this.file = file;
  }

  synchronized SSLSocketFactory factory() throws GeneralSecurityException, IOException {
    String now = "none";
    if (file != null && Files.exists(file)) {
      now = Files.getLastModifiedTime(file) + "/" + Files.size(file);
    }
    if (factory == null || !now.equals(seen)) {
      factory = upstreamContext(now.equals("none") ? null : file).getSocketFactory();
      seen = now;
    }
    return factory;
  }

  private static SSLContext upstreamContext(Path extraTrust)
      throws GeneralSecurityException, IOException {
    TrustManagerFactory jdk =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    jdk.init((KeyStore) null);
    X509TrustManager base = x509(jdk.getTrustManagers());
    X509TrustManager extra = null;
    if (extraTrust != null && Files.exists(extraTrust)) {
      KeyStore store = KeyStore.getInstance("PKCS12");
      store.load(null, null);
      int i = 0;
      try (InputStream pem = Files.newInputStream(extraTrust)) {
        for (var cert : CertificateFactory.getInstance("X.509").generateCertificates(pem)) {
          store.setCertificateEntry("extra-" + i++, cert);
        }
      }
      TrustManagerFactory f =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      f.init(store);
      extra = x509(f.getTrustManagers());
    }
    X509TrustManager extraTm = extra;
    X509TrustManager both =
        extraTm == null
            ? base
            : new X509TrustManager() {
              @Override
              public void checkClientTrusted(X509Certificate[] chain, String authType)
                  throws CertificateException {
                throw new CertificateException("the egress proxy authenticates no clients");
              }

              @Override
              public void checkServerTrusted(X509Certificate[] chain, String authType)
                  throws CertificateException {
                try {
                  base.checkServerTrusted(chain, authType);
                } catch (CertificateException e) {
                  extraTm.checkServerTrusted(chain, authType);
                }
              }

              @Override
              public X509Certificate[] getAcceptedIssuers() {
                X509Certificate[] a = base.getAcceptedIssuers();
                X509Certificate[] b = extraTm.getAcceptedIssuers();
                X509Certificate[] out = Arrays.copyOf(a, a.length + b.length);
                System.arraycopy(b, 0, out, a.length, b.length);
                return out;
              }
            };
    SSLContext context = SSLContext.getInstance("TLS");
    context.init(null, new TrustManager[] {both}, null);
    return context;
  }

  private static X509TrustManager x509(TrustManager[] managers) {
    for (TrustManager m : managers) {
      if (m instanceof X509TrustManager x) {
        return x;
      }
    }
    throw new IllegalStateException("no X509TrustManager");
  }
}
