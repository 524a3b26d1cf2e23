package dev.decodiff.harness.live;

import dev.decodiff.harness.report.Fmt;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.InferenceSession;
import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.EngineThrewException;
import dev.decodiff.harness.compare.StreamingCandidate;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.metal.TensorView;

import java.util.LinkedHashMap;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * The engine run live as a candidate, teacher-forced on the reference's tokens: step s feeds the manifest's
 * [start, start+length), recording only the wanted points. With the observer-effect check on, a second session
 * without any probe runs in lockstep and its logits must be bit-identical to the probed session's at every step.
 */
public final class LiveCandidate implements StreamingCandidate {
    private final Gemma4Model model;
    private final DumpManifest reference;
    private final CapturingProbe probe;
    private final InferenceSession probed;
    private final InferenceSession plain;
    private final EngineOptions options;
    private final Predicate<String> wanted;
    private final String description;
    private String observer;
    private boolean confirmed;
    private String note;
    private int next = 0;
    /** Steps the engine finished (the observer check replays only these). */
    private int completed = 0;

    public LiveCandidate(Gemma4Model model, EngineOptions options, DumpManifest reference, Predicate<String> wanted,
                         boolean checkObserverEffect) {
        EngineSetup.checkKvFits(model, options);
        this.model = model;
        this.reference = reference;
        this.options = options;
        this.wanted = wanted;
        this.probe = new CapturingProbe(wanted);
        this.probed = model.newSession(options.withProbe(probe));
        this.plain = checkObserverEffect ? model.newSession(options.withProbe(null)) : null;
        this.observer = checkObserverEffect ? "none" : "not_checked";
        String how = EngineSetup.describe(options);
        this.description = "live engine: " + model.directory() + " (teacher-forced" + (how.isEmpty() ? "" : " with " + how) + ")";
    }

    public static LiveCandidate forPoints(Gemma4Model model, EngineOptions options, DumpManifest reference, Set<String> points,
                                          boolean checkObserverEffect) {
        return new LiveCandidate(model, options, reference, points::contains, checkObserverEffect);
    }

    @Override public String describe() { return description; }

    @Override public DumpManifest.Producer producer() { return EngineSetup.producer(options, null, model); }

    @Override public int stepCount() { return reference.stepCount(); }

    @Override
    public StepTensors step(int s) {
        var captured = new LinkedHashMap<String, CapturedTensor>();
        var end = run(s, t -> captured.put(t.point(), t));
        var st = reference.step(s);
        return new LiveStep(s, st.start(), st.length(), captured, end.nextToken(), end.top2Margin(), end.origin());
    }

    /** Step s with each captured tensor handed to {@code sink} as the engine produces it: nothing of the step is held here. */
    @Override
    public StepEnd stream(int s, Consumer<TensorView> sink) {
        return run(s, t -> sink.accept(t.view()));
    }

    private StepEnd run(int s, Consumer<CapturedTensor> sink) {
        if (s != next) throw new IllegalStateException("live steps run in order: asked for " + s + ", next is " + next);
        next++;
        int[] tokens = reference.stepTokens(s);
        float[] logits;
        probe.sendTo(sink);
        try {
            logits = probed.forward(tokens);
        } catch (IllegalArgumentException e) {
            throw new BadInputException("reference step " + s + " cannot be fed to " + model.directory() + ": " + e.getMessage()
                    + "; is the reference from this checkpoint?", e);
        } catch (BadInputException e) {
            throw e;
        } catch (RuntimeException e) {
            throw new EngineThrewException(s, e);
        } finally {
            probe.sendTo(null);
        }
        if (plain != null) {
            float[] base;
            try {
                base = plain.forward(tokens);
            } catch (RuntimeException e) {
                throw new EngineThrewException(s, e);
            }
            if (observer.equals("none")) observer = observerDifference(s, base, logits);
        }
        completed = s + 1;
        return new StepEnd(Sampler.argmax(logits), LiveStep.top2Margin(logits), "live engine, step " + s);
    }

    public static String observerDifference(int step, float[] base, float[] probed) {
        if (base.length != probed.length) return "logits length differs at step " + step;
        int differing = 0;
        double max = 0;
        for (int i = 0; i < base.length; i++) {
            if (Float.floatToRawIntBits(base[i]) != Float.floatToRawIntBits(probed[i])) {
                differing++;
                max = Math.max(max, Math.abs((double) base[i] - probed[i]));
            }
        }
        if (differing == 0) return "none";
        return Fmt.format("logits with probes differ from logits without at step %d (%d of %d values, max |Δ| %.3g)",
                step, differing, base.length, max);
    }

    /**
     * The observer-effect verdict. A difference seen in the first pass is confirmed by a second pass over the steps
     * run so far, with two probe-free sessions beside the probed one: an engine whose float results change while the
     * JIT compiles its kernels (a vector reduction whose lane order differs between tiers) differs from itself too,
     * and that is not an effect of the probes.
     */
    @Override
    public String observerEffect() {
        if (observer.equals("none") || observer.equals("not_checked") || confirmed) return observer;
        confirmed = true;
        var probe2 = CapturingProbe.discarding(wanted);
        var probedAgain = model.newSession(options.withProbe(probe2));
        var plainA = model.newSession(options.withProbe(null));
        var plainB = model.newSession(options.withProbe(null));
        String first = observer;
        observer = "none";
        for (int s = 0; s < completed; s++) {
            int[] tokens = reference.stepTokens(s);
            float[] a = plainA.forward(tokens);
            float[] p = probedAgain.forward(tokens);
            float[] b = plainB.forward(tokens);
            String selfDiff = observerDifference(s, a, b);
            if (!selfDiff.equals("none")) {
                note = "the engine is not deterministic: two probe-free runs differ at step " + s + " (" + selfDiff
                        .replaceFirst("^logits with probes differ from logits without at step \\d+ \\(", "").replaceFirst("\\)$", "")
                        + "), so the observer effect cannot be judged bit for bit; first pass: " + first;
                return observer;
            }
            String d = observerDifference(s, a, p);
            if (!d.equals("none")) {
                observer = d;
                return observer;
            }
        }
        note = "observer check: the first pass differed (" + first + ") but a second, warm pass was bit-identical at every step: "
                + "the engine's float results change while the JIT warms up (not an effect of the probes)";
        return observer;
    }

    /** What the confirmation pass found beyond the verdict, or null. */
    @Override
    public String note() { return note; }
}
