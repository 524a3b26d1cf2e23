package dev.decodiff.harness.compare;

import java.util.ArrayList;
import java.util.List;

/**
 * The candidate engine threw while computing a step: a finding about the engine, reported with the comparison so
 * far, not a crash of the harness. {@code exception} is the thrown type's simple name, {@code frames} the top of its
 * stack ("InferenceSession.attention(InferenceSession.java:385)"), innermost first.
 */
public record EngineFailure(int step, String exception, String message, List<String> frames) {
    /** How many stack frames a report shows: enough to see the engine's own method, short enough to read. */
    public static final int FRAMES = 5;

    public EngineFailure {
        frames = List.copyOf(frames);
    }

    /** The failure of step {@code step}, from what the engine threw (wrappers of a worker thread's exception unwrapped). */
    public static EngineFailure of(int step, Throwable thrown) {
        Throwable t = thrown;
        while (t.getCause() != null && t.getCause() != t && isWrapper(t)) t = t.getCause();
        var frames = new ArrayList<String>();
        for (var f : t.getStackTrace()) {
            if (frames.size() == FRAMES) break;
            String cls = f.getClassName().substring(f.getClassName().lastIndexOf('.') + 1);
            frames.add(cls + "." + f.getMethodName() + "(" + (f.getFileName() == null ? "?" : f.getFileName())
                    + (f.getLineNumber() > 0 ? ":" + f.getLineNumber() : "") + ")");
        }
        String message = t.getMessage() == null ? "" : t.getMessage().strip().replaceAll("\\s*\\R\\s*", " ");
        return new EngineFailure(step, t.getClass().getSimpleName(), message, frames);
    }

    /** Exceptions that only carry another across a thread or an API boundary, with nothing of their own to say. */
    private static boolean isWrapper(Throwable t) {
        return t instanceof java.util.concurrent.CompletionException || t instanceof java.util.concurrent.ExecutionException
                || t instanceof java.lang.reflect.UndeclaredThrowableException
                || t.getClass() == RuntimeException.class && t.getMessage() != null && t.getMessage().equals(String.valueOf(t.getCause()));
    }

    /** "IllegalStateException: position 0 is no longer in the cache". */
    public String what() { return message.isEmpty() ? exception : exception + ": " + message; }

    /** "the engine threw at step 1: IllegalStateException: position 0 is … (at A.b(A.java:3) ← C.d(C.java:9))". */
    public String sentence() {
        return "the engine threw at step " + step + ": " + what() + (frames.isEmpty() ? "" : " (at " + String.join(" ← ", frames) + ")");
    }
}
