package dev.decodiff.harness.live;

import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.EngineThrewException;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpWriter;

import java.util.ArrayList;
import java.util.function.IntConsumer;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * Runs the engine step by step with a capturing probe and writes each step's tensors to a dump as the engine produces
 * them (the heap holds one tensor, not a step): the decode-and-record loop of {@code decodiff dump}, also used by
 * {@code decodiff bench} to make its compare pair. An exception from the engine becomes an
 * {@link EngineThrewException} (a finding about the engine), with the steps before it written.
 */
public final class DumpRecorder {
    private final CapturingProbe probe;
    private final ModelSession session;
    private final DumpWriter writer;
    private final Supplier<? extends RuntimeException> nothingCaptured;

    /**
     * Records the points {@code points} accepts, from the session {@code sessions} opens with the recording probe
     * (an engine's own options: a tunable engine's KV types and matmul precision). A step that captured no tensor
     * throws {@code nothingCaptured}'s exception (a dump of empty steps is no dump).
     */
    public DumpRecorder(java.util.function.Function<Probe, ModelSession> sessions, Predicate<String> points, DumpWriter writer,
                        Supplier<? extends RuntimeException> nothingCaptured) {
        this.probe = new CapturingProbe(points);
        this.session = sessions.apply(probe);
        this.writer = writer;
        this.nothingCaptured = nothingCaptured;
    }

    /** The same over any architecture's model, through the plug-in seam (its engine's defaults: exact fp32). */
    public DumpRecorder(LoadedModel model, Predicate<String> points, DumpWriter writer, Supplier<? extends RuntimeException> nothingCaptured) {
        this(model, java.util.List.of(), points, writer, nothingCaptured);
    }

    /** The same with catalog faults of the model's architecture switched on (by id). */
    public DumpRecorder(LoadedModel model, java.util.List<String> faults, Predicate<String> points, DumpWriter writer,
                        Supplier<? extends RuntimeException> nothingCaptured) {
        this.probe = new CapturingProbe(points);
        this.session = model.newSession(probe, faults);
        this.writer = writer;
        this.nothingCaptured = nothingCaptured;
    }

    /** Teacher-forced: feeds the reference's first {@code steps} steps as it recorded them. */
    public void teacherForced(DumpManifest reference, int steps, IntConsumer stepsDone) {
        for (int s = 0; s < steps; s++) {
            var st = reference.step(s);
            try (var step = streaming()) {
                float[] logits = forward(s, reference.stepTokens(s));
                commit(step, st.start(), st.length(), Sampler.argmax(logits), LiveStep.top2Margin(logits));
            }
            stepsDone.accept(s + 1);
        }
    }

    /**
     * Greedy from a prompt: the prefill, then {@code steps}−1 decode steps each fed the previous argmax; the
     * manifest's token list grows with every token chosen.
     */
    public void greedy(int[] prompt, int steps, IntConsumer stepsDone) {
        var tokens = new ArrayList<Integer>();
        for (int t : prompt) tokens.add(t);
        int[] feed = prompt;
        for (int s = 0; s < steps; s++) {
            int start = session.position();
            try (var step = streaming()) {
                float[] logits = forward(s, feed);
                int next = Sampler.argmax(logits);
                tokens.add(next);
                writer.setTokens(tokens);
                commit(step, start, feed.length, next, LiveStep.top2Margin(logits));
            }
            feed = new int[]{tokens.getLast()};
            stepsDone.accept(s + 1);
        }
    }

    /** One step of the engine; an exception from the engine becomes a finding about it, not an internal error. */
    private float[] forward(int step, int[] tokens) {
        try {
            return session.forward(tokens);
        } catch (BadInputException e) {
            throw e;
        } catch (RuntimeException e) {
            throw new EngineThrewException(step, e);
        }
    }

    /** The next step, its tensors written as the engine produces them. */
    private DumpWriter.StepWriter streaming() {
        var step = writer.beginStep();
        probe.sendTo(step::add);
        return step;
    }

    private void commit(DumpWriter.StepWriter step, int start, int length, int next, double margin) {
        if (step.isEmpty()) throw nothingCaptured.get();
        step.commit(start, length, next, margin);
    }
}
