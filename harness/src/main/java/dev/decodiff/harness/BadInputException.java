package dev.decodiff.harness;

import java.nio.file.Path;

/**
 * Input decodiff cannot judge: an unreadable dump, a manifest that breaks the schema, tensors that cannot be
 * compared, a reference from another checkpoint. The message is one line naming the file and what to do; the
 * CLI prints it and exits with 2. Bad input never yields "match".
 */
public final class BadInputException extends RuntimeException {
    public BadInputException(String message) { super(message); }

    public BadInputException(String message, Throwable cause) { super(message, cause); }

    public BadInputException(Path file, String what) { super(file + ": " + what); }

    public BadInputException(Path file, String what, Throwable cause) { super(file + ": " + what, cause); }

    /**
     * Makes a lower layer's message one line (Jackson appends "\n at [Source: …]" to parse errors). A damaged file can put
     * any byte into a name the message quotes, so every other control character is shown as an escape, never printed,
     * and an overlong name is cut ({@link Printable#line}).
     */
    public static String oneLine(String message) {
        if (message == null) return "";
        return Printable.line(message.replaceAll("\\s*\\n\\s*at \\[Source:[^\\]]*\\]", "").replaceAll("\\s*\\R\\s*", " ").strip());
    }

    /** A damaged safetensors file of a dump. */
    public static BadInputException damaged(RuntimeException e) {
        return new BadInputException(oneLine(e.getMessage()) + "; the dump is damaged — re-create it with its producer", e);
    }
}
