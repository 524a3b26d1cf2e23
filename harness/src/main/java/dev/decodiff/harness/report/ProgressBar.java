package dev.decodiff.harness.report;

import java.io.PrintStream;

/** A one-line progress bar on stderr for long live runs; silent when stderr is not a terminal. */
public final class ProgressBar implements AutoCloseable {
    private final PrintStream err;
    private final boolean on;
    private final String label;
    private final int total;
    private final long t0 = System.nanoTime();
    private int lastDrawn = -1;

    public ProgressBar(String label, int total) { this(label, total, System.err, Terminal.progressOnStderr()); }

    public ProgressBar(String label, int total, PrintStream err, boolean on) {
        this.err = err;
        this.on = on && total > 0;
        this.label = label;
        this.total = total;
    }

    public void update(int done) {
        if (!on || done == lastDrawn) return;
        lastDrawn = done;
        int width = 30;
        int filled = (int) Math.round(width * Math.min(1.0, done / (double) total));
        double secs = (System.nanoTime() - t0) / 1e9;
        err.print("\r" + label + " [" + "█".repeat(filled) + "·".repeat(width - filled) + "] " + done + "/" + total
                + Fmt.format("  %.1fs ", secs));
        err.flush();
    }

    @Override
    public void close() {
        if (on && lastDrawn >= 0) {
            err.print("\r\u001b[2K");
            err.flush();
        }
    }
}
