package dev.decodiff.harness.live;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.InferenceSession;
import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.CandidateSource;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.StepTensors;

import java.util.Locale;
import java.util.Set;
import java.util.function.Predicate;

/**
 * The engine run live as a candidate, teacher-forced on the reference's tokens: step s feeds the manifest's
 * [start, start+length), recording only the wanted points. With the observer-effect check on, a second session
 * without any probe runs in lockstep and its logits must be bit-identical to the probed session's at every step.
 */
public final class LiveCandidate implements CandidateSource {
    private final Gemma4Model model;
    private final DumpManifest reference;
    private final CapturingProbe probe;
    private final InferenceSession probed;
    private final InferenceSession plain;
    private final String description;
    private String observer;
    private int next = 0;

    public LiveCandidate(Gemma4Model model, EngineOptions options, DumpManifest reference, Predicate<String> wanted,
                         boolean checkObserverEffect) {
        this.model = model;
        this.reference = reference;
        this.probe = new CapturingProbe(wanted);
        this.probed = model.newSession(options.withProbe(probe));
        this.plain = checkObserverEffect ? model.newSession(options.withProbe(null)) : null;
        this.observer = checkObserverEffect ? "none" : "not_checked";
        String faults = options.faults().isEmpty() ? "" : " with faults " + String.join(",", options.faults().stream().map(Object::toString).sorted().toList());
        this.description = "live engine: " + model.directory() + " (teacher-forced" + faults + ")";
    }

    public static LiveCandidate forPoints(Gemma4Model model, EngineOptions options, DumpManifest reference, Set<String> points,
                                          boolean checkObserverEffect) {
        return new LiveCandidate(model, options, reference, points::contains, checkObserverEffect);
    }

    @Override public String describe() { return description; }

    @Override public int stepCount() { return reference.stepCount(); }

    @Override
    public StepTensors step(int s) {
        if (s != next) throw new IllegalStateException("live steps run in order: asked for " + s + ", next is " + next);
        next++;
        int[] tokens = reference.stepTokens(s);
        float[] logits;
        try {
            logits = probed.forward(tokens);
        } catch (IllegalArgumentException e) {
            throw new BadInputException("reference step " + s + " cannot be fed to " + model.directory() + ": " + e.getMessage()
                    + "; is the reference from this checkpoint?", e);
        }
        var captured = probe.take();
        if (plain != null) {
            float[] base = plain.forward(tokens);
            if (observer.equals("none")) observer = observerDifference(s, base, logits);
        }
        var st = reference.step(s);
        return new LiveStep(s, st.start(), st.length(), captured, Sampler.argmax(logits), LiveStep.top2Margin(logits), "live engine, step " + s);
    }

    static String observerDifference(int step, float[] base, float[] probed) {
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
        return String.format(Locale.ROOT, "logits with probes differ from logits without at step %d (%d of %d values, max |Δ| %.3g)",
                step, differing, base.length, max);
    }

    @Override public String observerEffect() { return observer; }
}
