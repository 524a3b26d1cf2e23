package dev.decodiff.harness.cli;

import dev.decodiff.harness.Printable;

import java.io.PrintWriter;
import java.io.Writer;

/**
 * A writer for a command's plain-text output (no colour of its own) that passes every line through
 * {@link Printable#line}: whatever a dump, a checkpoint or a GGUF file put into a name reaches the terminal escaped.
 */
final class PrintableLines extends Writer {
    private final PrintWriter out;
    private final StringBuilder line = new StringBuilder();

    PrintableLines(PrintWriter out) { this.out = out; }

    /** {@code out}, filtered. */
    static PrintWriter around(PrintWriter out) { return new PrintWriter(new PrintableLines(out), true); }

    @Override
    public void write(char[] buf, int off, int len) {
        for (int i = off; i < off + len; i++) {
            char c = buf[i];
            if (c == '\n') {
                out.print(Printable.line(line.toString()));
                out.print('\n');
                line.setLength(0);
            } else {
                line.append(c);
            }
        }
    }

    @Override
    public void flush() {
        if (!line.isEmpty()) {
            out.print(Printable.line(line.toString()));
            line.setLength(0);
        }
        out.flush();
    }

    @Override
    public void close() { flush(); }
}
