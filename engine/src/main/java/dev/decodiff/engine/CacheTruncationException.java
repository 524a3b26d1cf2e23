package dev.decodiff.engine;

/** A cache cut back past the point it can be restored to (a sliding ring has already overwritten what is needed). */
public final class CacheTruncationException extends RuntimeException {
    public CacheTruncationException(String message) { super(message); }
}
