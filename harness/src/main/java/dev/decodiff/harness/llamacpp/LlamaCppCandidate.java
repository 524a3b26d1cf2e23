package dev.decodiff.harness.llamacpp;

import dev.decodiff.harness.live.ObserverCheck;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.compare.CandidateSource;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.harness.arch.gemma4.LiveCandidate;
import dev.decodiff.harness.live.LiveStep;
import dev.decodiff.llamacpp.LlamaCppRunner;
import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.llamacpp.ffi.LlamaCppException;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * llama.cpp as a candidate: a GGUF run step by step, teacher-forced on the reference's tokens, its graph tensors
 * captured through the eval callback and named as capture points. With the observer check on, a second context
 * without any callback runs in lockstep and its logits must be bit-identical (the callback splits llama.cpp's graph
 * at every tensor it reads; that must change nothing).
 */
public final class LlamaCppCandidate implements CandidateSource {
    private final DumpManifest reference;
    private final Set<String> points;
    private final LlamaCppRunner probed;
    private final LlamaCppRunner plain;
    private final String description;
    private final Map<String, String> notCaptured = new LinkedHashMap<>();
    private String observer;
    private int next;

    private LlamaCppCandidate(DumpManifest reference, Set<String> points, LlamaCppRunner probed, LlamaCppRunner plain, String description) {
        this.reference = reference;
        this.points = points;
        this.probed = probed;
        this.plain = plain;
        this.description = description;
        this.observer = plain == null ? "not_checked" : "none";
    }

    /** Opens llama.cpp on {@code gguf} for the reference's points; {@code source}: where the GGUF came from, for the report. */
    public static LlamaCppCandidate open(Path gguf, String source, LlamaContext.Options options, DumpManifest reference,
                                         Set<String> points, boolean checkObserverEffect) {
        try {
            var probed = LlamaCppRunner.open(gguf, options, points::contains);
            LlamaCppRunner plain = null;
            try {
                checkShape(probed, reference, gguf);
                if (checkObserverEffect) plain = LlamaCppRunner.open(gguf, options, null);
            } catch (RuntimeException e) {
                probed.close();
                throw e;
            }
            String desc = LlamaCppRunner.describeRelease() + ": " + source + " (teacher-forced, " + LlamaContext.describe(options) + ")";
            return new LlamaCppCandidate(reference, points, probed, plain, desc);
        } catch (LlamaCppException e) {
            throw new BadInputException(e.getMessage(), e);
        }
    }

    /** A GGUF of another model would only diverge: refuse it when its layer count is not the reference's. */
    private static void checkShape(LlamaCppRunner r, DumpManifest reference, Path gguf) {
        int layers = r.model().layerCount();
        if (reference.model() != null && reference.model().numHiddenLayers() != layers)
            throw new BadInputException(gguf, "has " + layers + " layers but the reference's checkpoint has "
                    + reference.model().numHiddenLayers() + "; pass the GGUF of the checkpoint the reference was made from");
    }

    @Override public String describe() { return description; }

    /** The GGUF's weight precision (float32, float16, bfloat16). */
    public String weightDtype() { return probed.model().weightDtype(); }

    @Override public int stepCount() { return reference.stepCount(); }

    @Override
    public StepTensors step(int s) {
        if (s != next) throw new IllegalStateException("llama.cpp steps run in order: asked for " + s + ", next is " + next);
        next++;
        var st = reference.step(s);
        int[] tokens = reference.stepTokens(s);
        LlamaCppRunner.Step step;
        try {
            step = probed.step(tokens, st.start(), points);
            if (plain != null) {
                float[] base = plain.decodeAllOutputs(tokens, st.start());
                if (observer.equals("none")) observer = ObserverCheck.observerDifference(s, base, step.logits());
            }
        } catch (LlamaCppException | IllegalArgumentException e) {
            throw new BadInputException("reference step " + s + " cannot be run by llama.cpp: " + e.getMessage(), e);
        }
        step.notCaptured().forEach(notCaptured::putIfAbsent);
        var captured = new LinkedHashMap<String, CapturedTensor>();
        for (var c : step.tensors().values())
            if (!(st.start() == 0 && freshStateRead(c))) captured.put(c.point(), CapturedTensor.of(c.point(), c.shape(), c.data()));
        return new LiveStep(s, st.start(), st.length(), captured, argmax(step.logits()), LiveStep.top2Margin(step.logits()), "llama.cpp, step " + s);
    }

    /**
     * A Qwen3.5 state read at a sequence's first step, all zeros: what a fresh sequence starts from. Left out, as
     * transformers' references leave it out: a dump holding it could not serve as a reference (rel L2 against zeros
     * is undefined). A non-zero one — a state left over from elsewhere — is kept.
     */
    public static boolean freshStateRead(LlamaCppRunner.Captured c) {
        String kind = dev.decodiff.engine.CapturePoints.kindOf(c.point());
        if (!kind.equals(dev.decodiff.engine.CapturePoints.LINEAR_CONV_STATE_READ) && !kind.equals(dev.decodiff.engine.CapturePoints.LINEAR_STATE_READ))
            return false;
        for (float v : c.data()) if (v != 0) return false;
        return true;
    }

    private static int argmax(float[] x) {
        int best = 0;
        for (int i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
        return best;
    }

    @Override public String observerEffect() { return observer; }

    /** The points llama.cpp could not give, with why (they are listed as not compared, never as agreeing). */
    @Override
    public String note() {
        if (notCaptured.isEmpty()) return null;
        List<String> parts = new ArrayList<>();
        notCaptured.forEach((p, why) -> parts.add(p + ": " + why));
        return "not captured from llama.cpp: " + String.join("; ", parts);
    }

    @Override
    public void close() {
        try {
            probed.close();
        } finally {
            if (plain != null) plain.close();
        }
    }
}
