package dev.decodiff.harness.arch.gemma4.sweep;

import dev.decodiff.harness.selfcheck.Agreement;
import dev.decodiff.engine.CacheTruncationException;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.Gemma4Model;
import dev.decodiff.engine.InferenceSession;
import dev.decodiff.engine.KvSnapshot;
import dev.decodiff.engine.KvType;
import dev.decodiff.engine.Probe;
import dev.decodiff.harness.arch.gemma4.selfcheck.SelfCheck;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * Runs scenarios on decodiff's own engine: one {@link InferenceSession} per sequence, snapshots and copies through
 * {@link KvSnapshot} (a copy of a shorter prefix is a restore then a truncate, as a prefix cache does), truncation
 * through {@link InferenceSession#truncate} (which refuses what a sliding ring cannot honour). Every point of every
 * step is captured, and the KV-integrity rules ({@link KvIntegrity}) are checked on every step. The engine has no
 * multi-sequence batch, so a schedule with one is not applicable here.
 */
public final class EngineScenarios implements ScenarioEngine {
    private final Gemma4Model model;
    private final EngineOptions options;

    public EngineScenarios(Gemma4Model model, EngineOptions options) {
        this.model = model;
        this.options = options.withProbe(null);
    }

    @Override
    public String describe() {
        return "decodiff engine" + (options.faults().isEmpty() ? "" : " with faults "
                + options.faults().stream().map(Object::toString).sorted().collect(Collectors.joining(", ")));
    }

    @Override public Gemma4Config config() { return model.config(); }

    /** Fp32 summation-order noise: a rounding cache is compared only where both schedules read the same rounded rows. */
    @Override public double tolerance(Scenario.Settings settings) { return Agreement.TOLERANCE; }

    /** The engine's sliding layers always keep a ring of the window only. */
    @Override public boolean keepsWholeHistory(Scenario.Settings settings) { return false; }

    @Override public boolean batchesSequences() { return false; }

    @Override
    public String weightsIdentity() {
        return "checkpoint " + model.directory().getFileName() + ", config.json sha256 " + model.configSha256() + ", weights sha256 " + model.weightsSha256();
    }

    /** A sequence: its session and what its probe saw. */
    private final class Seq implements Probe {
        final int id;
        final InferenceSession session;
        KvIntegrity integrity;
        final List<ScheduleRun.Cell> cells;
        final List<ScheduleRun.Violation> violations;
        int step, start, length;

        Seq(int id, EngineOptions o, KvIntegrity integrity, List<ScheduleRun.Cell> cells, List<ScheduleRun.Violation> violations) {
            this.id = id;
            this.integrity = integrity;
            this.cells = cells;
            this.violations = violations;
            this.session = model.newSession(o.withProbe(this));
        }

        @Override
        public void beginStep(int s, int st, int len) {
            start = st;
            length = len;
        }

        @Override
        public float[] capture(String point, int[] shape, float[] data) {
            String kind = CapturePoints.kindOf(point);
            if (KvIntegrity.wants(kind)) integrity.capture(point, shape, data, step, id, start, length, violations);
            if (kind.equals(CapturePoints.LOGITS) || CapturePoints.isCacheRead(kind)) {
                cells.add(new ScheduleRun.Cell(step, id, start + length - 1, point, data.clone()));
                return null;
            }
            int rows = shape[0], width = data.length / Math.max(1, rows);
            for (int t = 0; t < rows; t++) cells.add(new ScheduleRun.Cell(step, id, start + t, point, Arrays.copyOfRange(data, t * width, (t + 1) * width)));
            return null;
        }
    }

    private record Saved(KvSnapshot kv, KvIntegrity integrity) {}

    @Override
    public ScheduleRun run(Scenario scenario, List<Op> schedule) {
        var o = options.withKvTypes(KvType.byId(scenario.settings().typeK()), KvType.byId(scenario.settings().typeV()));
        var cells = new ArrayList<ScheduleRun.Cell>();
        var violations = new ArrayList<ScheduleRun.Violation>();
        var seqs = new HashMap<Integer, Seq>();
        var saved = new HashMap<String, Saved>();
        int step = 0;
        for (int i = 0; i < schedule.size(); i++) {
            var op = schedule.get(i);
            try {
                switch (op) {
                    case Op.Feed f -> {
                        var s = seqs.computeIfAbsent(f.seq(), id -> newSeq(id, o, scenario, cells, violations));
                        int pos = s.session.position();
                        s.step = step++;
                        s.session.forward(tokens(scenario, f.seq(), pos, f.n()));
                    }
                    case Op.Batch b -> { return ScheduleRun.unsupported("decodiff's engine feeds one sequence per step (" + Op.describe(b) + ")"); }
                    case Op.Offset x -> { return ScheduleRun.unsupported("decodiff's engine starts every sequence at position 0 (" + Op.describe(x) + ")"); }
                    case Op.Shift x -> { return ScheduleRun.unsupported("decodiff's engine does not move cached positions (" + Op.describe(x) + ")"); }
                    case Op.Snapshot sn -> {
                        var s = existing(seqs, sn.seq(), op);
                        saved.put(sn.name(), new Saved(s.session.snapshot(), s.integrity.copy()));
                    }
                    case Op.Restore r -> {
                        var sv = saved.get(r.name());
                        if (sv == null) throw new BadScheduleException(Op.describe(op) + ": no snapshot named '" + r.name() + "' was taken before it");
                        samePrefix(scenario, sv.kv().tokens(), r.seq(), op);
                        var s = seqs.computeIfAbsent(r.seq(), id -> newSeq(id, o, scenario, cells, violations));
                        s.session.restore(sv.kv());
                        s.integrity = sv.integrity().copy();
                    }
                    case Op.Truncate t -> existing(seqs, t.seq(), op).session.truncate(t.length());
                    case Op.Copy c -> {
                        var src = existing(seqs, c.from(), op);
                        if (c.length() > src.session.position())
                            throw new BadScheduleException(Op.describe(op) + ": sequence " + c.from() + " holds only " + src.session.position() + " positions");
                        samePrefix(scenario, Arrays.copyOf(src.session.tokens(), c.length()), c.to(), op);
                        var dst = newSeq(c.to(), o, scenario, cells, violations);
                        dst.session.restore(src.session.snapshot());
                        dst.integrity = src.integrity.copy();
                        seqs.put(c.to(), dst);
                        if (c.length() < src.session.position()) dst.session.truncate(c.length());
                    }
                }
            } catch (CacheTruncationException e) {
                return new ScheduleRun(cells, violations, new ScheduleRun.Refusal(i, Op.describe(op), e.getMessage()), null, step);
            } catch (BadScheduleException e) {
                throw e;
            } catch (RuntimeException e) {
                return new ScheduleRun(cells, violations, null, null, step, new ScheduleRun.Thrown(i, Op.describe(op), step - 1, String.valueOf(e.getMessage())));
            }
        }
        return new ScheduleRun(cells, violations, null, null, step);
    }

    private Seq newSeq(int id, EngineOptions o, Scenario sc, List<ScheduleRun.Cell> cells, List<ScheduleRun.Violation> violations) {
        sc.stream(id);
        var kv = o.keyType();
        return new Seq(id, o, new KvIntegrity(model.config(), kv, o.valueType()), cells, violations);
    }

    private static Seq existing(Map<Integer, Seq> seqs, int id, Op op) {
        var s = seqs.get(id);
        if (s == null) throw new BadScheduleException(Op.describe(op) + ": sequence " + id + " holds nothing yet");
        return s;
    }

    static int[] tokens(Scenario sc, int seq, int pos, int n) {
        int[] stream = sc.stream(seq);
        if (pos + n > stream.length)
            throw new BadScheduleException("sequence " + seq + " has a stream of " + stream.length + " tokens; a feed of " + n + " at position " + pos + " runs past it");
        return Arrays.copyOfRange(stream, pos, pos + n);
    }

    static void samePrefix(Scenario sc, int[] held, int seq, Op op) {
        int[] stream = sc.stream(seq);
        if (held.length > stream.length || !Arrays.equals(held, 0, held.length, stream, 0, held.length))
            throw new BadScheduleException(Op.describe(op) + ": the state holds " + held.length + " tokens that are not the first tokens of sequence " + seq + "'s stream");
    }
}
