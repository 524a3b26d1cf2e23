package dev.decodiff.llamacpp.ffi;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * llama.cpp's log, received through its log callback: kept (the last lines) so that a refusal can be explained in
 * our own error message, and echoed to stderr only with {@code -Ddecodiff.llamacpp.log=true}.
 */
public final class LlamaLog {
    /** ggml_log_level values (ggml/include/ggml.h). */
    static final int NONE = 0, DEBUG = 1, INFO = 2, WARN = 3, ERROR = 4, CONT = 5;
    private static final int KEEP = 200;
    private static final String RESOLVED = "resolve_fused_ops:";

    private final ArrayDeque<String> lines = new ArrayDeque<>();
    private final List<String> resolved = new ArrayList<>();
    private final StringBuilder partial = new StringBuilder();
    private final boolean echo = Boolean.getBoolean("decodiff.llamacpp.log");
    private int lastLevel = INFO;

    /** The native log callback: {@code void (*)(enum ggml_log_level, const char * text, void * user_data)}. */
    void acceptNative(int level, MemorySegment text, MemorySegment userData) {
        try {
            accept(level, text.reinterpret(Long.MAX_VALUE).getString(0));
        } catch (Throwable ignored) {
            // an exception must not cross into native code (it would end the JVM); a lost log line is harmless
        }
    }

    synchronized void accept(int level, String text) {
        if (level != CONT) lastLevel = level;
        if (echo) System.err.print(text);
        partial.append(text);
        int nl;
        while ((nl = partial.indexOf("\n")) >= 0) {
            String line = partial.substring(0, nl).strip();
            partial.delete(0, nl + 1);
            if (line.isEmpty()) continue;
            if (line.startsWith(RESOLVED) && resolved.size() < KEEP) resolved.add(line.substring(RESOLVED.length()).strip());
            lines.addLast(tag(lastLevel) + line);
            if (lines.size() > KEEP) lines.removeFirst();
        }
    }

    private static String tag(int level) {
        return switch (level) {
            case ERROR -> "E ";
            case WARN -> "W ";
            default -> "I ";
        };
    }

    /** Marks where a call starts: {@link #errorsSinceMark()} then reports only what that call logged. */
    public synchronized void mark() {
        resolved.clear();
        lines.addLast("I --mark--");
        if (lines.size() > KEEP) lines.removeFirst();
    }

    /** The error and warning lines logged since the last {@link #mark()}, joined for a one-line message. */
    public synchronized String errorsSinceMark() {
        var all = List.copyOf(lines);
        int from = all.lastIndexOf("I --mark--") + 1;
        var sb = new StringBuilder();
        for (String l : all.subList(from, all.size())) {
            if (l.startsWith("E ") || l.startsWith("W ")) {
                if (!sb.isEmpty()) sb.append("; ");
                sb.append(l.substring(2));
            }
        }
        return sb.toString();
    }

    /** Every line kept (the last {@value #KEEP}), for diagnostics. */
    public synchronized List<String> lines() { return List.copyOf(lines); }

    /**
     * The line since the last {@link #mark()} in which llama.cpp said how it resolved an "auto" setting (its
     * {@code resolve_fused_ops} lines, e.g. "Flash Attention enabled") that contains {@code needle}, or null. Kept
     * apart from the other lines: a context's set-up logs more lines than are kept.
     */
    public synchronized String resolvedSinceMark(String needle) {
        for (String l : resolved) if (l.contains(needle)) return l;
        return null;
    }

    /** The first kept line containing {@code needle}, or null. */
    public synchronized String find(String needle) {
        for (String l : lines) if (l.contains(needle)) return l.substring(2);
        return null;
    }
}
