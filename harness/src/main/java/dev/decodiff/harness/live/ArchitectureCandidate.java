package dev.decodiff.harness.live;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.arch.LoadedModel;
import dev.decodiff.engine.arch.ModelSession;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.PartClock;
import dev.decodiff.harness.compare.EngineThrewException;
import dev.decodiff.harness.compare.StreamingCandidate;
import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.StepTensors;
import dev.decodiff.metal.TensorView;

import java.util.LinkedHashMap;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * Any architecture's engine run live as a candidate through the plug-in seam ({@link LoadedModel}), teacher-forced
 * on the reference's tokens: step s feeds the manifest's [start, start+length), recording only the wanted points.
 * With the observer check on, a probe-free session runs every step whole beside the probed one and its logits must be
 * bit-identical at every step. (Gemma 4 keeps its own {@code LiveCandidate}, with faults, KV-cache types and the
 * resumed check of long steps.)
 */
public final class ArchitectureCandidate implements StreamingCandidate {
    private final LoadedModel model;
    private final java.util.List<String> faults;
    private final DumpManifest reference;
    private final CapturingProbe probe;
    private final ModelSession probed;
    private final ModelSession plain;
    private String observer;
    private int next;

    public ArchitectureCandidate(LoadedModel model, DumpManifest reference, Predicate<String> wanted, boolean checkObserverEffect) {
        this(model, java.util.List.of(), reference, wanted, checkObserverEffect);
    }

    /** The engine with catalog faults switched on (ids of its architecture's catalog), in the probed and the plain session alike. */
    public ArchitectureCandidate(LoadedModel model, java.util.List<String> faults, DumpManifest reference, Predicate<String> wanted,
                                 boolean checkObserverEffect) {
        this.model = model;
        this.faults = java.util.List.copyOf(faults);
        this.reference = reference;
        this.probe = new CapturingProbe(wanted);
        this.probed = model.newSession(probe, faults);
        this.plain = checkObserverEffect ? model.newSession(null, faults) : null;
        this.observer = checkObserverEffect ? "none" : "not_checked";
    }

    @Override
    public String describe() {
        return "live engine: " + model.directory() + " (" + model.architecture().name() + ", teacher-forced"
                + (faults.isEmpty() ? "" : ", faults " + String.join(",", faults)) + ")";
    }

    @Override
    public DumpManifest.Producer producer() { return EngineSetup.producer(faults, null); }

    @Override public int stepCount() { return reference.stepCount(); }

    @Override
    public StepTensors step(int s) {
        var captured = new LinkedHashMap<String, CapturedTensor>();
        var end = run(s, t -> captured.put(t.point(), t));
        var st = reference.step(s);
        return new LiveStep(s, st.start(), st.length(), captured, end.nextToken(), end.top2Margin(), end.origin());
    }

    @Override
    public StepEnd stream(int s, Consumer<TensorView> sink) { return run(s, t -> sink.accept(t.view())); }

    private StepEnd run(int s, Consumer<CapturedTensor> sink) {
        if (s != next) throw new IllegalStateException("live steps run in order: asked for " + s + ", next is " + next);
        next++;
        int[] tokens = reference.stepTokens(s);
        float[] logits;
        probe.sendTo(sink);
        try (var part = PartClock.enter(tokens.length > 1 ? "prefill" : "decode")) {
            logits = probed.forward(tokens);
        } catch (IllegalArgumentException e) {
            throw new BadInputException("reference step " + s + " cannot be fed to " + model.directory() + ": " + e.getMessage()
                    + "; is the reference from this checkpoint?", e);
        } catch (BadInputException e) {
            throw e;  // the comparison, fed inside the forward by the probe, refused the reference: not the engine's failure
        } catch (RuntimeException e) {
            throw new EngineThrewException(s, e);
        } finally {
            probe.sendTo(null);
        }
        if (plain != null) {
            float[] base;
            try (var part = PartClock.enter("observer_check")) {
                base = plain.forward(tokens);
            } catch (RuntimeException e) {
                throw new EngineThrewException(s, e);
            }
            if (observer.equals("none")) observer = ObserverCheck.observerDifference(s, base, logits);
        }
        return new StepEnd(argmax(logits), LiveStep.top2Margin(logits), "live engine, step " + s);
    }

    @Override public String observerEffect() { return observer; }

    private static int argmax(float[] v) {
        int best = 0;
        for (int j = 1; j < v.length; j++) if (v[j] > v[best]) best = j;
        return best;
    }
}
