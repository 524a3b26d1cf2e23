package dev.decodiff.harness.dump;

import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.plan.CapturePlan;
import dev.decodiff.harness.plan.ProducerConventions;
import dev.decodiff.metal.SafetensorsException;
import dev.decodiff.metal.SafetensorsFile;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Format conformance of a dump, rule by rule (docs/dump-format.md), for producers other than decodiff: unlike
 * {@link DumpReader#open}, which stops at the first problem, this lists every problem it can find. The manifest comes
 * first: when it cannot be read, nothing else can be checked.
 */
public final class DumpValidator {
    private DumpValidator() {}

    /** The outcome: problems make the dump invalid; notes (producer-specific points, …) do not. */
    public record Result(Path dir, DumpManifest manifest, List<String> problems, List<String> notes, Set<String> points) {
        public boolean valid() { return problems.isEmpty(); }
    }

    public static Result validate(Path dir) { return validate(dir, false); }

    /**
     * The check before the completeness mark is added to a dump that lacks it ({@code validate --mark-complete}):
     * every rule but the mark itself, and then what proves the producer finished — every step file read to its last
     * byte, and steps that feed every token but the last generated one (a producer killed after two steps has
     * written every token it was asked for into "tokens", but steps for only a few).
     */
    public static Result validateForMark(Path dir) { return validate(dir, true); }

    private static Result validate(Path dir, boolean forMark) {
        var problems = new ArrayList<String>();
        var notes = new ArrayList<String>();
        if (!Files.isDirectory(dir)) {
            problems.add(dir + ": " + (Files.exists(dir) ? "is a file" : "does not exist") + "; a dump is a folder holding manifest.json and the step files");
            return new Result(dir, null, problems, notes, Set.of());
        }
        Path mf = dir.resolve(DumpManifest.FILE_NAME);
        String notFile = DumpReader.notARegularFile(mf);
        if (notFile != null) {
            problems.add(mf + ": " + notFile);
            return new Result(dir, null, problems, notes, Set.of());
        }
        DumpManifest m;
        try {
            m = DumpReader.parseManifest(mf);
        } catch (BadInputException e) {
            problems.add(BadInputException.oneLine(e.getMessage()));
            return new Result(dir, null, problems, notes, Set.of());
        }
        if (!m.complete() && !forMark)
            problems.add(mf + ": no completeness mark (\"complete\": true, written last by the producer once every step is on disk)"
                    + "; when its producer did finish, `decodiff validate --mark-complete " + dir + "` adds it");
        if (forMark) checkWhole(dir, mf, m, problems);

        var stepPoints = new ArrayList<Map<String, long[]>>();
        for (int s = 0; s < m.stepCount(); s++) stepPoints.add(checkStep(dir, mf, m, s, problems));

        var all = new LinkedHashSet<String>();
        stepPoints.forEach(p -> all.addAll(p.keySet()));
        problems.addAll(tensorProblems(dir, mf, m, stepPoints, false));
        try {
            var readRows = ReadRows.of(mf);
            if (readRows != null) {
                problems.addAll(readRows.problems(mf, m, stepPoints));
                notes.add("k_read/v_read hold the last " + readRows.last() + " positions read at most (\"" + ReadRows.FIELD + "\": \"" + readRows + "\")");
            }
        } catch (BadInputException e) {
            problems.add(BadInputException.oneLine(e.getMessage()));
        }
        checkAbsentLayers(mf, m, all, problems);
        problems.addAll(stepHoles(m, stepPoints));
        var unknown = all.stream().filter(p -> !isContractName(p)).toList();
        // names of another producer's convention are a mistake to map, not extra points to keep
        String firstFile = m.stepCount() > 0 ? dir.resolve(m.step(0).file()).toString() : mf.toString();
        var foreign = ProducerConventions.namingProblems(firstFile, unknown);
        problems.addAll(foreign);
        if (foreign.isEmpty() && !all.isEmpty() && unknown.size() == all.size())
            problems.add(firstFile + ": none of its " + all.size() + " tensor names is a capture point (embed, layers.N.attn.q, …, logits), so nothing"
                    + " in it can be compared; name the tensors after the points `decodiff plan` lists (docs/dump-format.md §3)");
        if (!unknown.isEmpty())
            notes.add(unknown.size() + " point(s) outside the contract names (kept, listed by compare as not compared): "
                    + String.join(", ", unknown.subList(0, Math.min(8, unknown.size()))) + (unknown.size() > 8 ? ", …" : ""));
        return new Result(dir, m, List.copyOf(problems), List.copyOf(notes), Set.copyOf(all));
    }

    private static void checkWhole(Path dir, Path mf, DumpManifest m, List<String> problems) {
        int fed = m.step(m.stepCount() - 1).end(), tokens = m.tokens().size();
        if (fed < tokens - 1)
            problems.add(mf + ": the steps feed positions 0–" + (fed - 1) + " but \"tokens\" holds " + tokens + ", so steps for positions "
                    + fed + "–" + (tokens - 2) + " are missing: the producer stopped before it finished — re-create the dump");
        for (var st : m.steps()) {
            Path f = dir.resolve(st.file());
            if (!Files.isRegularFile(f)) continue; // already a problem
            try (var in = Files.newInputStream(f)) {
                in.transferTo(java.io.OutputStream.nullOutputStream());
            } catch (java.io.IOException e) {
                problems.add(f + ": cannot be read to its end (" + e.getMessage() + ")");
            }
        }
    }

    /** One step file: readable, inside the folder, a sound header of float tensors; its tensors' shapes (empty when unreadable). */
    private static Map<String, long[]> checkStep(Path dir, Path mf, DumpManifest m, int s, List<String> problems) {
        try {
            return DumpReader.checkStepFile(dir, dir.resolve(m.step(s).file()), mf);
        } catch (BadInputException e) {
            problems.add(BadInputException.oneLine(e.getMessage()));
            return Map.of();
        }
    }

    /**
     * The format's rules on the tensors a readable dump holds, one line per breach: each tensor holds at least one
     * value, each contract point has its shape at its step (§3), no layer reaches num_hidden_layers, the selection
     * covers every point held (§4.2), the trailing axes and each read window stay the same from step to step.
     * {@code validate} lists them all; {@link DumpReader#open}, and so every comparison, refuses a dump with any of
     * them, on either side. For a comparison's candidate ({@code candidate}) a read of a length no window gives is
     * the comparison's to judge (a divergence against the reference's read), not bad input.
     */
    static List<String> tensorProblems(Path dir, Path mf, DumpManifest m, List<Map<String, long[]>> stepShapes, boolean candidate) {
        var problems = new ArrayList<String>();
        var all = new LinkedHashSet<String>();
        var plan = CapturePlan.forManifest(m); // the shape rules plan, validate and compare share
        for (int s = 0; s < stepShapes.size(); s++) {
            Path f = dir.resolve(m.step(s).file());
            for (var t : stepShapes.get(s).entrySet()) {
                all.add(t.getKey());
                String why = elementCount(t.getValue()) == 0 ? "it holds no values; every tensor of a dump holds at least one (an empty tensor compares as nothing)"
                        : plan.shapeProblem(t.getKey(), t.getValue(), s, candidate);
                if (why != null) problems.add(f + ": tensor '" + t.getKey() + "' has shape " + Arrays.toString(t.getValue()) + "; " + why);
            }
        }
        checkLayerIndices(mf, m, all, problems);
        checkSelection(mf, m, all, problems);
        checkWidthsAgreeAcrossSteps(m, stepShapes, problems);
        if (!candidate) checkReadWindows(dir, m, stepShapes, problems);
        return problems;
    }

    private static long elementCount(long[] shape) {
        long n = 1;
        for (long d : shape) n *= d;
        return n;
    }

    private static void checkLayerIndices(Path mf, DumpManifest m, Set<String> points, List<String> problems) {
        int declared = m.model().numHiddenLayers();
        for (String p : points) {
            int l = CapturePoints.layerOf(p);
            if (l >= declared)
                problems.add(mf + ": \"model.num_hidden_layers\" is " + declared + " but the steps hold '" + p + "' (layer " + l
                        + "); the manifest and the step files disagree — re-create the dump");
        }
    }

    private static void checkAbsentLayers(Path mf, DumpManifest m, Set<String> points, List<String> problems) {
        int declared = m.model().numHiddenLayers();
        var present = new TreeSet<Integer>();
        for (String p : points) {
            int l = CapturePoints.layerOf(p);
            if (l >= 0) present.add(l);
        }
        if (m.selectedPoints() == null && !present.isEmpty() && present.headSet(declared).size() < declared) {
            var absent = new ArrayList<Integer>();
            for (int l = 0; l < declared; l++) if (!present.contains(l)) absent.add(l);
            problems.add(mf + ": declares " + declared + " layers but no step holds a point of layer(s) "
                    + dev.decodiff.harness.report.Fmt.ranges(absent, 0) + ", and no selected_points explains it");
        }
    }

    private static void checkSelection(Path mf, DumpManifest m, Set<String> points, List<String> problems) {
        if (m.selectedPoints() == null) return;
        var sel = PointSelection.of(m.selectedPoints());
        var outside = points.stream().filter(p -> !sel.test(p)).toList();
        if (!outside.isEmpty())
            problems.add(mf + ": selected_points " + sel + " does not select " + String.join(", ", outside.subList(0, Math.min(6, outside.size())))
                    + (outside.size() > 6 ? ", …" : "") + ", yet the steps hold it; record the selection the producer really used");
    }

    /**
     * A point present in some steps but not others is a hole: a comparison could not compare it there. validate lists
     * it as a problem; a comparison weighs it as a shortfall of the dump (incomplete).
     */
    static List<String> stepHoles(DumpManifest m, List<? extends Map<String, long[]>> steps) {
        var problems = new ArrayList<String>();
        var all = new LinkedHashSet<String>();
        steps.forEach(p -> all.addAll(p.keySet()));
        for (int s = 0; s < steps.size(); s++) {
            if (steps.get(s).isEmpty()) continue; // unreadable: already a problem
            var lacking = new ArrayList<String>();
            for (String p : all)
                if (!steps.get(s).containsKey(p) && !(m.step(s).start() == 0 && isStateRead(p))) lacking.add(p);
            if (!lacking.isEmpty())
                problems.add(m.step(s).file() + ": lacks " + lacking.size() + " point(s) other steps hold: "
                        + String.join(", ", lacking.subList(0, Math.min(6, lacking.size()))) + (lacking.size() > 6 ? ", …" : ""));
        }
        return problems;
    }

    /**
     * A linear-attention state read at a step's start (conv_state_read, state_read): absent on the first step, where
     * there is no state yet to read (docs/dump-format.md), so not a hole there.
     */
    private static boolean isStateRead(String point) {
        String kind = CapturePoints.kindOf(point);
        return CapturePoints.layerOf(point) >= 0
                && (kind.equals(CapturePoints.LINEAR_CONV_STATE_READ) || kind.equals(CapturePoints.LINEAR_STATE_READ));
    }

    /**
     * The read window is a property of the layer: k_read/v_read hold C = min(W, p+1) positions at every step, one W
     * per point (the sliding window, or a declared cut of the rows), or p+1 throughout on a full layer. A read that
     * is shorter than p+1 at one step fixes W; any other length at another step is no window. (A comparison's
     * candidate is not held to it: a read of another length is judged a divergence against the reference's.)
     */
    private static void checkReadWindows(Path dir, DumpManifest m, List<Map<String, long[]>> steps, List<String> problems) {
        var window = new LinkedHashMap<String, long[]>(); // point → {W, the step that showed it}
        for (int s = 0; s < steps.size(); s++) {
            long positions = m.step(s).end();
            for (var e : steps.get(s).entrySet()) {
                long[] shape = e.getValue();
                if (isRead(e.getKey()) && shape.length == 3 && shape[0] >= 1 && shape[0] < positions)
                    window.putIfAbsent(e.getKey(), new long[]{shape[0], s});
            }
        }
        for (int s = 0; s < steps.size(); s++) {
            long positions = m.step(s).end();
            for (var e : steps.get(s).entrySet()) {
                long[] w = window.get(e.getKey()), shape = e.getValue();
                if (w == null || shape.length != 3 || shape[0] < 1 || shape[0] > positions) continue; // no window, or another rule's problem
                long expected = Math.min(w[0], positions);
                if (shape[0] != expected)
                    problems.add(dir.resolve(m.step(s).file()) + ": tensor '" + e.getKey() + "' reads " + shape[0] + " positions, but its read window"
                            + " is " + w[0] + " (step " + w[1] + " read " + w[0] + " of " + m.step((int) w[1]).end() + ") and this step's last query"
                            + " has " + positions + ", so it reads min(" + w[0] + ", " + positions + ") = " + expected + "; a read window is the"
                            + " same at every step");
            }
        }
    }

    private static boolean isRead(String point) {
        return CapturePoints.layerOf(point) >= 0 && CapturePoints.isCacheRead(CapturePoints.kindOf(point));
    }

    /** Every axis but the first (rows, or read positions) is a property of the model: it cannot change from step to step. */
    private static void checkWidthsAgreeAcrossSteps(DumpManifest m, List<Map<String, long[]>> steps, List<String> problems) {
        var first = new LinkedHashMap<String, long[]>();
        var firstStep = new LinkedHashMap<String, Integer>();
        for (int s = 0; s < steps.size(); s++) {
            for (var e : steps.get(s).entrySet()) {
                long[] shape = e.getValue();
                long[] tail = e.getKey().equals(CapturePoints.LOGITS) ? shape : Arrays.copyOfRange(shape, Math.min(1, shape.length), shape.length);
                var seen = first.putIfAbsent(e.getKey(), tail);
                firstStep.putIfAbsent(e.getKey(), s);
                if (seen != null && !Arrays.equals(seen, tail))
                    problems.add(m.step(s).file() + ": tensor '" + e.getKey() + "' has shape " + Arrays.toString(shape)
                            + " but its trailing axes were " + Arrays.toString(seen) + " at step " + firstStep.get(e.getKey())
                            + (isRead(e.getKey()) && growsWithPositions(seen, tail)
                            ? "; it looks like [kv_heads, C, head_dim] (the attention kernels' layout); decodiff's is [C, kv_heads, head_dim]:"
                            + " swap the first two axes (NumPy: x.transpose(1, 0, 2))" : ""));
            }
        }
    }

    /** Trailing axes whose first changes while the rest stay: positions read on axis 1, where the heads belong. */
    private static boolean growsWithPositions(long[] before, long[] now) {
        return before.length == 2 && now.length == 2 && before[0] != now[0] && before[1] == now[1];
    }

    static boolean isContractName(String p) {
        if (p.equals(CapturePoints.EMBED) || p.equals(CapturePoints.PLE) || p.equals(CapturePoints.FINAL_NORM) || p.equals(CapturePoints.LOGITS))
            return true;
        int layer = CapturePoints.layerOf(p);
        return layer >= 0 && p.equals(CapturePoints.layer(layer, CapturePoints.kindOf(p))) && CapturePoints.LAYER_SUFFIXES.contains(CapturePoints.kindOf(p));
    }
}
