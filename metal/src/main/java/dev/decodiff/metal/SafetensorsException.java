package dev.decodiff.metal;

import java.nio.file.Path;

/** A safetensors file that cannot be read as such; the message names the file (and tensor) and what to do. */
public final class SafetensorsException extends RuntimeException {
    public SafetensorsException(Path file, String what) {
        super(file + ": " + what);
    }

    public SafetensorsException(Path file, String what, Throwable cause) {
        super(file + ": " + what, cause);
    }
}
