package dev.decodiff.harness.compare;

import dev.decodiff.harness.dump.StepTensors;

/**
 * Closes finished steps on a helper thread while the next step is compared. Unmapping a step undoes every page
 * mapping the comparison made (milliseconds for a long prefill, all of it on one core in the kernel), which would
 * otherwise leave the other core idle between steps. One close runs at a time and {@link #close} waits for the
 * last, so no step outlives the comparison; a close that failed is rethrown here.
 */
final class StepCloser implements AutoCloseable {
    private Thread pending;
    private volatile RuntimeException failure;

    /** Closes the steps (nulls skipped) in the background, once the previous ones are closed. */
    void closeLater(StepTensors... steps) {
        await();
        // A virtual thread: one per step costs microseconds to start, where a platform thread costs a hundred.
        pending = Thread.ofVirtual().name("decodiff-step-closer").start(() -> {
            for (var s : steps) {
                try {
                    if (s != null) s.close();
                } catch (RuntimeException e) {
                    if (failure == null) failure = e;
                }
            }
        });
    }

    private void await() {
        if (pending == null) return;
        boolean interrupted = false;
        while (true) {
            try {
                pending.join();
                break;
            } catch (InterruptedException e) {
                interrupted = true; // a step must not stay mapped: finish waiting, then restore the flag
            }
        }
        pending = null;
        if (interrupted) Thread.currentThread().interrupt();
        var f = failure;
        failure = null;
        if (f != null) throw f;
    }

    @Override
    public void close() { await(); }
}
