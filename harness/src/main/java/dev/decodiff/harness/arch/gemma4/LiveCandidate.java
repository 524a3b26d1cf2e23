package dev.decodiff.harness.arch.gemma4;

import dev.decodiff.harness.live.CapturingProbe;
import dev.decodiff.harness.live.EngineSetup;
import dev.decodiff.harness.live.LiveStep;
import dev.decodiff.harness.live.ObserverCheck;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.InferenceSession;
import dev.decodiff.engine.KvSnapshot;
import dev.decodiff.engine.KvType;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.Sampler;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.PartClock;
import dev.decodiff.harness.compare.EngineThrewException;
import dev.decodiff.harness.compare.StreamingCandidate;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.metal.TensorView;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.function.UnaryOperator;

/**
 * The engine run live as a candidate, teacher-forced on the reference's tokens: step s feeds the manifest's
 * [start, start+length), recording only the wanted points. With the observer-effect check on, a second session
 * without any probe follows the probed one and its logits must be bit-identical to the probed session's at every
 * step. A step longer than {@link #ObserverCheck.REPLAYED} positions (a long prompt's prefill) is not computed twice: the probe-free
 * session resumes from the probed pass's own state before its last {@value #ObserverCheck.REPLAYED} positions and re-runs only
 * those ({@link InferenceSession#forward(int[], int, java.util.function.Consumer)}: each position's rows are computed
 * on their own, so with f32 caches an unprobed re-run has the one pass's bits). That proves no probe changed any
 * value of those positions, at any layer or point, that reaches the step's logits, and of every decode step; what it
 * gives up is an effect confined to the earlier positions' values, whose keys and values both sessions then read as
 * the probed pass computed them. {@link ObserverCheck#WHOLE} re-runs every step whole instead (the prompt computed
 * twice), as does any run with an encoded KV cache (a resumed step reads the earlier rows as the cache rounded them,
 * the one pass read them unrounded) or a fault (some change what a resumed session computes).
 */
public final class LiveCandidate implements StreamingCandidate {
    private final Gemma4Model model;
    private final DumpManifest reference;
    private final CapturingProbe probe;
    private final UnaryOperator<Probe> around;
    private final InferenceSession probed;
    private final InferenceSession plain;
    private final EngineOptions options;
    private final Predicate<String> wanted;
    private final String description;
    /** Whether a long step may be checked on its last positions only (f32 caches, no fault, not asked for WHOLE). */
    private final boolean resumable;
    private String observer;
    private boolean confirmed;
    private String note;
    /** The steps checked on their last positions only, what of each was re-run (for the report). */
    private final java.util.List<String> partial = new java.util.ArrayList<>();
    private int next = 0;
    /** Steps the engine finished (the observer check replays only these). */
    private int completed = 0;

    public LiveCandidate(Gemma4Model model, EngineOptions options, DumpManifest reference, Predicate<String> wanted,
                         boolean checkObserverEffect) {
        this(model, options, reference, wanted, checkObserverEffect ? ObserverCheck.LAST_POSITIONS : ObserverCheck.OFF, p -> p);
    }

    public LiveCandidate(Gemma4Model model, EngineOptions options, DumpManifest reference, Predicate<String> wanted, ObserverCheck check) {
        this(model, options, reference, wanted, check, p -> p);
    }

    /** {@code around} wraps each probed session's probe (a test plants a probe that changes a value through it). */
    LiveCandidate(Gemma4Model model, EngineOptions options, DumpManifest reference, Predicate<String> wanted, ObserverCheck check,
                  UnaryOperator<Probe> around) {
        Gemma4Engine.checkKvFits(model, options);
        this.model = model;
        this.reference = reference;
        this.options = options;
        this.wanted = wanted;
        this.around = around;
        this.probe = new CapturingProbe(wanted);
        this.probed = model.newSession(options.withProbe(around.apply(probe)));
        this.plain = check != ObserverCheck.OFF ? model.newSession(options.withProbe(null)) : null;
        this.observer = check != ObserverCheck.OFF ? "none" : "not_checked";
        this.resumable = check == ObserverCheck.LAST_POSITIONS && options.faults().isEmpty()
                && options.keyType() == KvType.F32 && options.valueType() == KvType.F32;
        String how = EngineSetup.describe(options);
        this.description = "live engine: " + model.directory() + " (teacher-forced" + (how.isEmpty() ? "" : " with " + how) + ")";
    }

    public static LiveCandidate forPoints(Gemma4Model model, EngineOptions options, DumpManifest reference, Set<String> points,
                                          boolean checkObserverEffect) {
        return new LiveCandidate(model, options, reference, points::contains, checkObserverEffect);
    }

    public static LiveCandidate forPoints(Gemma4Model model, EngineOptions options, DumpManifest reference, Set<String> points,
                                          ObserverCheck check) {
        return new LiveCandidate(model, options, reference, points::contains, check);
    }

    @Override public String describe() { return description; }

    @Override public DumpManifest.Producer producer() { return Gemma4Engine.producer(options, null, model); }

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
        int split = splitOf(tokens.length);
        var within = new KvSnapshot[1];
        float[] logits;
        probe.sendTo(sink);
        try (var part = PartClock.enter(tokens.length > 1 ? "prefill" : "decode")) {
            logits = split > 0 ? probed.forward(tokens, split, st -> within[0] = st) : probed.forward(tokens);
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
            try (var part = PartClock.enter("observer_check")) {
                base = probeFree(plain, tokens, split, within[0]);
            } catch (RuntimeException e) {
                throw new EngineThrewException(s, e);
            }
            if (split > 0) partial.add(Fmt.format("step %d's last %,d of %,d positions (resumed from the probed pass's own keys and values of positions 0–%,d)",
                    s, tokens.length - split, tokens.length, reference.step(s).start() + split - 1));
            if (observer.equals("none")) observer = ObserverCheck.observerDifference(s, base, logits);
        }
        completed = s + 1;
        return new StepEnd(Sampler.argmax(logits), LiveStep.top2Margin(logits), "live engine, step " + s);
    }

    /** Where a step of n tokens is split for the observer check: the state after this many positions; 0 to re-run it whole. */
    private int splitOf(int n) {
        return plain != null && resumable && n > ObserverCheck.REPLAYED ? n - ObserverCheck.REPLAYED : 0;
    }

    /** The step without probes: whole, or its positions from {@code split} on, resumed from the probed pass's state there. */
    private static float[] probeFree(InferenceSession plain, int[] tokens, int split, KvSnapshot within) {
        if (split == 0) return plain.forward(tokens);
        plain.restore(within);
        return plain.forward(Arrays.copyOfRange(tokens, split, tokens.length));
    }
    /**
     * The observer-effect verdict. A difference seen in the first pass is confirmed by a second pass over the steps
     * run so far, with two probe-free sessions beside the probed one (each checked as in the first pass): an engine
     * whose float results change while the JIT compiles its kernels (a vector reduction whose lane order differs
     * between tiers) differs from itself too, and that is not an effect of the probes.
     */
    @Override
    public String observerEffect() {
        if (observer.equals("none") || observer.equals("not_checked") || confirmed) return observer;
        confirmed = true;
        var probedAgain = model.newSession(options.withProbe(around.apply(CapturingProbe.discarding(wanted))));
        var plainA = model.newSession(options.withProbe(null));
        var plainB = model.newSession(options.withProbe(null));
        String first = observer;
        observer = "none";
        for (int s = 0; s < completed; s++) {
            int[] tokens = reference.stepTokens(s);
            int split = splitOf(tokens.length);
            var within = new KvSnapshot[1];
            float[] p = split > 0 ? probedAgain.forward(tokens, split, st -> within[0] = st) : probedAgain.forward(tokens);
            float[] a = probeFree(plainA, tokens, split, within[0]);
            float[] b = probeFree(plainB, tokens, split, within[0]);
            String selfDiff = ObserverCheck.observerDifference(s, a, b);
            if (!selfDiff.equals("none")) {
                note = "the engine is not deterministic: two probe-free runs differ at step " + s + " (" + selfDiff
                        .replaceFirst("^logits with probes differ from logits without at step \\d+ \\(", "").replaceFirst("\\)$", "")
                        + "), so the observer effect cannot be judged bit for bit; first pass: " + first;
                return observer;
            }
            String d = ObserverCheck.observerDifference(s, a, p);
            if (!d.equals("none")) {
                observer = d;
                return observer;
            }
        }
        note = "observer check: the first pass differed (" + first + ") but a second, warm pass was bit-identical at every step: "
                + "the engine's float results change while the JIT warms up (not an effect of the probes)";
        return observer;
    }

    /** What the confirmation pass found beyond the verdict, and what a check on a long step's last positions left out; or null. */
    @Override
    public String note() {
        if (partial.isEmpty()) return note;
        String coverage = "observer check re-ran without probes " + String.join(", ", partial) + " and every other step whole: an effect of the probes confined to "
                + "the earlier positions' values is not seen (--full-observer-check re-runs every step whole)";
        return note == null ? coverage : note + "; " + coverage;
    }
}
