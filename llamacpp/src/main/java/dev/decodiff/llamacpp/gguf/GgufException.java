package dev.decodiff.llamacpp.gguf;

import java.nio.file.Path;

/** A GGUF file that cannot be read or written, or a checkpoint that cannot be converted; the message names the file. */
public final class GgufException extends RuntimeException {
    public GgufException(Path file, String what) { super(file + ": " + what); }

    public GgufException(Path file, String what, Throwable cause) { super(file + ": " + what, cause); }
}
