package dev.decodiff.llamacpp.ffi;

/** llama.cpp cannot be used or refused what it was given; the message names the file or setting and the fix. */
public class LlamaCppException extends RuntimeException {
    public LlamaCppException(String message) { super(message); }

    public LlamaCppException(String message, Throwable cause) { super(message, cause); }
}
