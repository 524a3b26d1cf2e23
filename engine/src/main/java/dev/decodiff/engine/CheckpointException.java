package dev.decodiff.engine;

/** A checkpoint that cannot be loaded or run; the message names the file and what to do. */
public final class CheckpointException extends RuntimeException {
    public CheckpointException(String message) { super(message); }

    public CheckpointException(String message, Throwable cause) { super(message, cause); }
}
