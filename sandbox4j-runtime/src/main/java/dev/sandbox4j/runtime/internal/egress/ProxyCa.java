package dev.sandbox4j.runtime.internal.egress;

import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.runtime.internal.util.SecretFiles;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.math.BigInteger;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x500.X500NameBuilder;
import org.bouncycastle.asn1.x500.style.BCStyle;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.cert.X509v3CertificateBuilder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509ExtensionUtils;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

/**
 * The egress proxy's certificate authority for one engine home, used only for sandboxes whose
 * policy opts in to TLS interception: {@code ca.crt} (PEM, to install into such a sandbox's trust
 * store) and {@code ca.key} (0600, never leaves the host) in one directory, created once (under a
 * file lock, so two engine processes agree on one CA). Leaf certificates for the hosts a sandbox
 * connects to are signed on demand with one proxy-wide key and cached in memory.
 *
 * <p>Keys are EC P-256. The CA is valid for 10 years; leaves for {@link #LEAF_VALIDITY}, renewed
 * after half of it. Thread-safe.
 */
final class ProxyCa {
  static final Duration LEAF_VALIDITY = Duration.ofDays(7);
  private static final int MAX_CACHED_LEAVES = 1_000;

  private final X509Certificate caCert;
  private final PrivateKey caKey;
  private final KeyPair leafKey;
  private final SecureRandom random = new SecureRandom();

  /** Host → server context with its leaf; guarded by itself, least recently used dropped first. */
  private final LinkedHashMap<String, Leaf> leaves =
      new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Leaf> eldest) {
          return size() > MAX_CACHED_LEAVES;
        }
      };

  private record Leaf(SSLContext context, Instant renewAfter) {}

  private ProxyCa(X509Certificate caCert, PrivateKey caKey) throws GeneralSecurityException {
    this.caCert = caCert;
    this.caKey = caKey;
    this.leafKey = newKeyPair();
  }

  /** The CA in {@code dir} ({@code ca.crt}, {@code ca.key}), created there if missing. */
  public static ProxyCa loadOrCreate(Path dir) throws IOException {
    PrivateFiles.createPrivateDirectories(dir);
    try (FileLock lock = FileLock.acquire(dir.resolve(".lock"))) {
      Path crt = dir.resolve("ca.crt");
      Path key = dir.resolve("ca.key");
      try {
        if (!Files.exists(crt) || !Files.exists(key)) {
          create(crt, key, dir);
        }
        return new ProxyCa(readCertificate(Files.readString(crt)), readKey(Files.readString(key)));
      } catch (GeneralSecurityException | OperatorCreationException e) {
        throw new IOException(
            "the egress proxy CA in " + dir + " is unusable: " + e.getMessage(), e);
      }
    }
  }

  /** The CA certificate in PEM, as a sandbox's trust store takes it. */
  public String certificatePem() {
    try {
      return pem("CERTIFICATE", caCert.getEncoded());
    } catch (java.security.cert.CertificateEncodingException e) {
      throw new IllegalStateException(e);
    }
  }

  public X509Certificate certificate() {
    return caCert;
  }

  /**
   * A server-side TLS context presenting a certificate for {@code host} (a normalized name or an IP
   * literal) signed by this CA.
   */
  public SSLContext serverContext(String host) throws GeneralSecurityException {
    Instant now = Instant.now();
    synchronized (leaves) {
      Leaf cached = leaves.get(host);
      if (cached != null && now.isBefore(cached.renewAfter())) {
        return cached.context();
      }
    }
    X509Certificate leaf = signLeaf(host, now);
    KeyStore store = KeyStore.getInstance("PKCS12");
    try {
      store.load(null, null);
    } catch (IOException e) {
      throw new GeneralSecurityException(e);
    }
    char[] password = new char[0];
    store.setKeyEntry("leaf", leafKey.getPrivate(), password, new X509Certificate[] {leaf, caCert});
    KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    kmf.init(store, password);
    SSLContext context = SSLContext.getInstance("TLS");
    context.init(kmf.getKeyManagers(), null, random);
    synchronized (leaves) {
      leaves.put(host, new Leaf(context, now.plus(LEAF_VALIDITY.dividedBy(2))));
    }
    return context;
  }

  /** A certificate for {@code host} signed by this CA (tests also use it to fake a real server). */
  public X509Certificate signLeaf(String host, Instant now) throws GeneralSecurityException {
    return signLeaf(host, now, leafKey);
  }

  public X509Certificate signLeaf(String host, Instant now, KeyPair key)
      throws GeneralSecurityException {
    GeneralName san =
        isIpLiteral(host)
            ? new GeneralName(GeneralName.iPAddress, host)
            : new GeneralName(GeneralName.dNSName, host);
    try {
      JcaX509ExtensionUtils ext = new JcaX509ExtensionUtils();
      X509v3CertificateBuilder b =
          new JcaX509v3CertificateBuilder(
                  caCert,
                  new BigInteger(127, random),
                  Date.from(now.minus(Duration.ofHours(1))),
                  Date.from(now.plus(LEAF_VALIDITY)),
                  new X500NameBuilder(BCStyle.INSTANCE).addRDN(BCStyle.CN, host).build(),
                  key.getPublic())
              .addExtension(Extension.basicConstraints, true, new BasicConstraints(false))
              .addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.digitalSignature))
              .addExtension(
                  Extension.extendedKeyUsage,
                  false,
                  new ExtendedKeyUsage(KeyPurposeId.id_kp_serverAuth))
              .addExtension(Extension.subjectAlternativeName, false, new GeneralNames(san))
              .addExtension(
                  Extension.authorityKeyIdentifier, false, ext.createAuthorityKeyIdentifier(caCert))
              .addExtension(
                  Extension.subjectKeyIdentifier,
                  false,
                  ext.createSubjectKeyIdentifier(key.getPublic()));
      return new JcaX509CertificateConverter()
          .getCertificate(b.build(new JcaContentSignerBuilder("SHA256withECDSA").build(caKey)));
    } catch (OperatorCreationException | IOException e) {
      throw new GeneralSecurityException("cannot sign a certificate for " + host, e);
    }
  }

  static KeyPair newKeyPair() throws GeneralSecurityException {
    KeyPairGenerator kpg = KeyPairGenerator.getInstance("EC");
    kpg.initialize(new ECGenParameterSpec("secp256r1"));
    return kpg.generateKeyPair();
  }

  private static void create(Path crt, Path key, Path dir)
      throws IOException, GeneralSecurityException, OperatorCreationException {
    KeyPair pair = newKeyPair();
    Instant now = Instant.now();
    X500Name name =
        new X500NameBuilder(BCStyle.INSTANCE)
            .addRDN(BCStyle.O, "Sandbox4j")
            .addRDN(BCStyle.CN, "Sandbox4j egress proxy CA " + Integer.toHexString(dir.hashCode()))
            .build();
    JcaX509ExtensionUtils ext = new JcaX509ExtensionUtils();
    X509v3CertificateBuilder b =
        new JcaX509v3CertificateBuilder(
                name,
                new BigInteger(127, new SecureRandom()),
                Date.from(now.minus(Duration.ofHours(1))),
                Date.from(now.plus(Duration.ofDays(3650))),
                name,
                pair.getPublic())
            .addExtension(Extension.basicConstraints, true, new BasicConstraints(0))
            .addExtension(
                Extension.keyUsage, true, new KeyUsage(KeyUsage.keyCertSign | KeyUsage.cRLSign))
            .addExtension(
                Extension.subjectKeyIdentifier,
                false,
                ext.createSubjectKeyIdentifier(pair.getPublic()));
    X509Certificate cert =
        new JcaX509CertificateConverter()
            .getCertificate(
                b.build(new JcaContentSignerBuilder("SHA256withECDSA").build(pair.getPrivate())));
    // The key first: a certificate on disk means its key is there too.
    SecretFiles.write(
        key,
        pem("PRIVATE KEY", pair.getPrivate().getEncoded()).getBytes(StandardCharsets.US_ASCII));
    AtomicFiles.write(
        crt, pem("CERTIFICATE", cert.getEncoded()).getBytes(StandardCharsets.US_ASCII));
  }

  static X509Certificate readCertificate(String pem) throws GeneralSecurityException {
    return (X509Certificate)
        CertificateFactory.getInstance("X.509")
            .generateCertificate(new ByteArrayInputStream(pem.getBytes(StandardCharsets.US_ASCII)));
  }

  private static PrivateKey readKey(String pem) throws GeneralSecurityException {
    String body =
        pem.replace("-----BEGIN PRIVATE KEY-----", "")
            .replace("-----END PRIVATE KEY-----", "")
            .replaceAll("\\s", "");
    return KeyFactory.getInstance("EC")
        .generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(body)));
  }

  static String pem(String type, byte[] der) {
    return "-----BEGIN "
        + type
        + "-----\n"
        + Base64.getMimeEncoder(64, new byte[] {'\n'}).encodeToString(der)
        + "\n-----END "
        + type
        + "-----\n";
  }

  private static boolean isIpLiteral(String host) {
    try {
      InetAddress.ofLiteral(host);
      return true;
    } catch (IllegalArgumentException e) {
      return false;
    }
  }
}
