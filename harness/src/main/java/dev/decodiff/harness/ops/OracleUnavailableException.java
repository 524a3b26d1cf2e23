package dev.decodiff.harness.ops;

/** The oracle (ND4J) could not be started: missing jars, or its native library failed to load. The CLI exits 2. */
public final class OracleUnavailableException extends RuntimeException {
    public OracleUnavailableException(String message, Throwable cause) { super(message, cause); }
}
