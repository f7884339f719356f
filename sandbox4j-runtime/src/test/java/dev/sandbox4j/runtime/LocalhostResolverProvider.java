package dev.sandbox4j.runtime;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.net.spi.InetAddressResolver;
import java.net.spi.InetAddressResolverProvider;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * Resolves every {@code *.localhost} name to 127.0.0.1 in the test JVM, as RFC 6761 says and as
 * browsers do (the system resolver here does not), so that tests use port URLs as they are, with
 * {@code java.net.http}; every other name goes to the built-in resolver.
 */
public final class LocalhostResolverProvider extends InetAddressResolverProvider {
  @Override
  public InetAddressResolver get(Configuration configuration) {
    InetAddressResolver builtin = configuration.builtinResolver();
    return new InetAddressResolver() {
      @Override
      public Stream<InetAddress> lookupByName(String host, LookupPolicy policy)
          throws UnknownHostException {
        if (host.toLowerCase(Locale.ROOT).endsWith(".localhost")) {
          return Stream.of(InetAddress.getByAddress(host, new byte[] {127, 0, 0, 1}));
        }
        return builtin.lookupByName(host, policy);
      }

      @Override
      public String lookupByAddress(byte[] addr) throws UnknownHostException {
        return builtin.lookupByAddress(addr);
      }
    };
  }

  @Override
  public String name() {
    return "sandbox4j-test-localhost";
  }
}
