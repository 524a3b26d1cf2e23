package dev.decodiff.harness.dump;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.metal.Parallel;
import dev.decodiff.metal.SafetensorsException;
import dev.decodiff.metal.SafetensorsFile;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Opens a dump folder (docs/dump-format.md): validates manifest.json against the v1 schema (UTF-8 JSON, no duplicate
 * keys), checks that steps, tokens and prompt_length agree, that every step file exists inside the folder and has a
 * sound safetensors header with float tensors, and that the layer indices fit num_hidden_layers. What a sound dump
 * can still lack — the completeness mark, whole layers — is kept as {@link #gaps()}, for the verdict to weigh. Step
 * data is read one step at a time through memory maps ({@link #readStep}), so dumps larger than RAM can be compared.
 */
public final class DumpReader {
    /** Strict: a repeated key ("steps" twice) is a damaged manifest, not "the last one wins". */
    private static final ObjectMapper JSON = new ObjectMapper()
            .enable(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .enable(com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    private final Path dir;
    private final DumpManifest manifest;
    private final List<Set<String>> stepPoints;
    private final List<Map<String, long[]>> stepShapes;
    private final List<String> gaps;
    private final ReadRows readRows;

    private DumpReader(Path dir, DumpManifest manifest, List<Map<String, long[]>> stepShapes, ReadRows readRows) {
        this.dir = dir;
        this.manifest = manifest;
        this.readRows = readRows;
        this.stepPoints = stepShapes.stream().map(m -> Set.copyOf(m.keySet())).toList();
        this.stepShapes = List.copyOf(stepShapes);
        this.gaps = findGaps(dir, manifest, allPoints(), stepShapes);
    }

    /** Opens a dump held to every rule of the format: a reference, or a dump on its own. */
    public static DumpReader open(Path dir) { return open(dir, false); }

    /**
     * Opens the dump a comparison judges against a reference (opened with {@link #open}). It is held to the same
     * rules but one: a k_read/v_read that reads more positions than the step has is left to the comparison, which
     * judges it a divergence against the reference's read window and explains it ("reads 1 older one"), instead of
     * refusing the candidate. It cannot pass: the reference's read is within the bound, so the shapes differ.
     */
    public static DumpReader openCandidate(Path dir) { return open(dir, true); }

    private static DumpReader open(Path dir, boolean candidate) {
        if (!Files.exists(dir))
            throw new BadInputException(dir, "no such dump folder; pass a folder holding manifest.json and step-NNNN.safetensors");
        if (!Files.isDirectory(dir))
            throw new BadInputException(dir, "is a file, not a dump folder; pass the folder that holds manifest.json");
        Path mf = dir.resolve(DumpManifest.FILE_NAME);
        String notFile = notARegularFile(mf);
        if (notFile != null) throw new BadInputException(mf, notFile + (Files.exists(mf) ? "" : " (docs/dump-format.md) — is this the right folder?"));
        checkInside(dir, mf);
        DumpManifest manifest = parseManifest(mf);
        var shapes = checkStepFiles(dir, manifest, mf);
        checkTensors(dir, mf, manifest, shapes, candidate);
        var readRows = ReadRows.of(mf);
        if (readRows != null) {
            var problems = readRows.problems(mf, manifest, shapes);
            if (!problems.isEmpty())
                throw new BadInputException(problems.getFirst() + "; the dump breaks its own declaration — fix its producer");
        }
        return new DumpReader(dir, manifest, shapes, readRows);
    }

    /**
     * The format's tensor rules, the ones {@code validate} applies ({@link DumpValidator#tensorProblems}): a dump that
     * breaks one is refused whichever side it is on, so two dumps broken the same way (every tensor empty, a first
     * axis that is not the step's token count) cannot agree with each other.
     */
    private static void checkTensors(Path dir, Path mf, DumpManifest manifest, List<Map<String, long[]>> shapes, boolean candidate) {
        var problems = DumpValidator.tensorProblems(dir, mf, manifest, shapes, candidate);
        if (problems.isEmpty()) return;
        String more = problems.size() == 1 ? "" : " (and " + (problems.size() - 1) + " more problem" + (problems.size() > 2 ? "s" : "") + ")";
        throw new BadInputException(problems.getFirst() + more + "; the dump breaks docs/dump-format.md — `decodiff validate " + dir
                + "` lists every problem; fix its producer");
    }

    /**
     * Why a path that must be a plain file is not one: "missing" when nothing is there, else what it is instead (a
     * folder, a FIFO, a device) — a dump with a folder in a step file's place is damaged, not incomplete. Null for a
     * regular file (or a link to one).
     */
    static String notARegularFile(Path f) {
        if (Files.isRegularFile(f)) return null;
        if (!Files.exists(f, java.nio.file.LinkOption.NOFOLLOW_LINKS)) return "missing";
        if (!Files.exists(f)) return "is a link to nothing (" + linkTarget(f) + "); it must be a plain file";
        String what = Files.isDirectory(f) ? "a directory" : "a special file (a FIFO, socket or device)";
        return "is not a regular file but " + what + "; it must be a plain file";
    }

    private static String linkTarget(Path f) {
        try {
            return Files.readSymbolicLink(f).toString();
        } catch (IOException | UnsupportedOperationException e) {
            return "unreadable link";
        }
    }

    /**
     * What this dump lacks although it reads cleanly: the producer's completeness mark, or whole layers it declares but
     * holds no point of (when the user made no point selection that would explain it).
     */
    private static List<String> findGaps(Path dir, DumpManifest manifest, Set<String> points, List<Map<String, long[]>> stepShapes) {
        var gaps = new ArrayList<String>();
        for (String hole : DumpValidator.stepHoles(manifest, stepShapes)) gaps.add(dir + ": " + hole + " — re-create the dump");
        if (!manifest.complete())
            gaps.add(dir + " has no completeness mark (\"complete\": true in manifest.json): its producer stopped before finishing"
                    + " (killed, disk full) or predates the mark — re-create the dump, or, if its producer did finish,"
                    + " `decodiff validate --mark-complete " + dir + "` checks every step file and adds the mark");
        if (manifest.selectedPoints() == null) {
            var present = new java.util.TreeSet<Integer>();
            for (String p : points) {
                int l = dev.decodiff.engine.CapturePoints.layerOf(p);
                if (l >= 0) present.add(l);
            }
            int declared = manifest.model().numHiddenLayers();
            if (!present.isEmpty() && present.size() < declared) {
                var absent = new ArrayList<Integer>();
                for (int l = 0; l < declared; l++) if (!present.contains(l)) absent.add(l);
                gaps.add(dir + " declares " + declared + " layers but holds no point of layer" + (absent.size() > 1 ? "s " : " ")
                        + dev.decodiff.harness.report.Fmt.ranges(absent, 0) + " and records no point selection — re-create the dump");
            }
        }
        return List.copyOf(gaps);
    }

    /**
     * Checks every step file, spread over the cores: each check parses a header of hundreds of tensors, twice, and a
     * compare opens two dumps before it reads a byte of data. The first bad file in step order is the one reported,
     * as if they were checked one by one.
     */
    private static List<Map<String, long[]>> checkStepFiles(Path dir, DumpManifest manifest, Path mf) {
        var steps = manifest.steps();
        @SuppressWarnings("unchecked") Map<String, long[]>[] points = new Map[steps.size()];
        var failures = new RuntimeException[steps.size()];
        Parallel.forRange(steps.size(), 1, (from, to) -> {
            for (int i = from; i < to; i++) {
                try {
                    points[i] = checkStepFile(dir, dir.resolve(steps.get(i).file()), mf);
                } catch (RuntimeException e) {
                    failures[i] = e;
                }
            }
        });
        for (var f : failures) if (f != null) throw f;
        return List.of(points);
    }

    public Path dir() { return dir; }

    public DumpManifest manifest() { return manifest; }

    /** The dump's declared cut of its k_read/v_read rows ({@code read_rows}), or null when it holds every row read. */
    public ReadRows readRows() { return readRows; }

    public Path manifestFile() { return dir.resolve(DumpManifest.FILE_NAME); }

    public int stepCount() { return manifest.stepCount(); }

    /** What the dump lacks although it reads cleanly (no completeness mark, absent layers); empty for a whole dump. */
    public List<String> gaps() { return gaps; }

    /** The capture points stored for step s (from its header, read on open). */
    public Set<String> points(int s) { return stepPoints.get(s); }

    /** The shape of a point at step s (from its header, read on open), or null when the step does not hold it. */
    public long[] shape(int s, String point) {
        long[] shape = stepShapes.get(s).get(point);
        return shape == null ? null : shape.clone();
    }

    /** The union of the points of all steps, in first-seen order. */
    public Set<String> allPoints() {
        var all = new LinkedHashSet<String>();
        stepPoints.forEach(all::addAll);
        return all;
    }

    public Path stepFile(int s) { return dir.resolve(manifest.step(s).file()); }

    /** Memory-maps step s; close it when done so at most a step or two is mapped at a time. */
    public DumpStep readStep(int s) {
        Path f = stepFile(s);
        try {
            return new DumpStep(manifest.step(s), SafetensorsFile.open(f));
        } catch (SafetensorsException e) {
            throw BadInputException.damaged(e);
        }
    }

    // ---------------------------------------------------------------- validation

    /** One step file: a plain file inside the folder with a sound header of float tensors; returns each tensor's shape. */
    static Map<String, long[]> checkStepFile(Path dir, Path f, Path mf) {
        String notFile = notARegularFile(f);
        if (notFile != null)
            throw new BadInputException(f, notFile.equals("missing")
                    ? "missing, but " + mf.getFileName() + " names it; the dump is incomplete — re-create it (or fix its manifest)"
                    : notFile + ", and " + mf.getFileName() + " names it as a step file; the dump is damaged — re-create it");
        checkInside(dir, f);
        checkHeaderJson(f);
        try (var sf = SafetensorsFile.open(f)) {
            if (sf.names().isEmpty())
                throw new BadInputException(f, "holds no tensors (empty safetensors header); the dump is damaged — re-create it with its producer");
            for (var t : sf.tensors().values()) {
                if (!t.dtype().isFloat())
                    throw new BadInputException(f, "tensor '" + t.name() + "' has dtype " + t.dtype()
                            + "; capture points must be F32, BF16 or F16 — fix the producer");
            }
            var shapes = new java.util.LinkedHashMap<String, long[]>();
            for (var t : sf.tensors().values()) shapes.put(t.name(), t.shape().clone());
            return shapes;
        } catch (SafetensorsException e) {
            throw BadInputException.damaged(e);
        }
    }

    /** A manifest or step file that is a link must still land inside the dump folder: a dump is one self-contained folder. */
    private static void checkInside(Path dir, Path f) {
        try {
            Path real = f.toRealPath(), home = dir.toRealPath();
            if (!real.startsWith(home))
                throw new BadInputException(f, "resolves to " + real + ", outside the dump folder " + home
                        + "; a dump's files must lie inside its folder — copy the file in instead of linking it");
        } catch (IOException e) {
            throw new BadInputException(f, "cannot be resolved: " + e.getMessage());
        }
    }

    private static final ObjectMapper STRICT = JSON;

    /** The header must be exactly one JSON object: "{}garbage" is a corrupted header, not an empty file. */
    private static void checkHeaderJson(Path f) {
        try (var ch = java.nio.channels.FileChannel.open(f)) {
            var len = java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            if (ch.read(len, 0) < 8) return; // too short: SafetensorsFile says so
            long n = len.getLong(0);
            if (n <= 0 || n > ch.size() - 8 || n > 100L * 1024 * 1024) return; // SafetensorsFile says so
            var header = java.nio.ByteBuffer.allocate((int) n);
            ch.read(header, 8);
            STRICT.readTree(SafetensorsFile.utf8(f, java.util.Arrays.copyOf(header.array(), header.position())).strip());
        } catch (JsonProcessingException e) {
            throw new BadInputException(f, "safetensors header is not one valid JSON object (" + dev.decodiff.metal.JsonErrors.plain(e)
                    + "); the dump is damaged — re-create it with its producer");
        } catch (SafetensorsException e) {
            throw BadInputException.damaged(e);
        } catch (IOException e) {
            throw new BadInputException(f, "cannot be read: " + e.getMessage());
        }
    }

    /** Parses and validates manifest.json; every problem is a one-line BadInputException naming the file. */
    public static DumpManifest parseManifest(Path mf) {
        JsonNode root;
        try {
            root = JSON.readTree(Files.readString(mf));
        } catch (JsonProcessingException e) {
            throw new BadInputException(mf, "is not valid JSON (" + dev.decodiff.metal.JsonErrors.plain(e) + "); re-create the dump or fix the file");
        } catch (java.nio.charset.CharacterCodingException e) {
            throw new BadInputException(mf, "is not valid UTF-8 text; a manifest is UTF-8 JSON — re-create the dump or fix the file");
        } catch (IOException e) {
            throw new BadInputException(mf, "cannot be read: " + e.getMessage());
        }
        var v = new Check(mf);
        if (root == null || !root.isObject()) throw v.fail("is not a JSON object");
        String format = v.text(root, "format");
        if (!DumpManifest.FORMAT.equals(format)) throw v.fail("\"format\" is \"" + format + "\", expected \"decodiff-dump\"");
        JsonNode ver = root.get("version");
        if (ver == null || !ver.isIntegralNumber() || !ver.canConvertToInt())
            throw v.fail("\"version\" is missing or not an integer; a dump v1 manifest has \"version\": 1");
        if (ver.asInt() != DumpManifest.VERSION)
            throw v.fail("unknown dump format version " + ver.asInt() + "; this decodiff reads version 1 — upgrade decodiff or re-create the dump");

        JsonNode p = root.get("producer");
        DumpManifest.Producer producer = null;
        if (p != null && !p.isNull()) {
            if (!p.isObject()) throw v.fail("\"producer\" must be an object");
            producer = ProducerFields.read(p, v::fail);
        }

        JsonNode m = root.get("model");
        if (m == null || !m.isObject()) throw v.fail("\"model\" is missing or not an object (needs model_type, num_hidden_layers, config_sha256)");
        String configSha = v.sha(m, "model.config_sha256", m.get("config_sha256"), false);
        String weightsSha = v.sha(m, "model.weights_sha256", m.get("weights_sha256"), true);
        int layers = v.integer(m, "model.num_hidden_layers", "num_hidden_layers");
        if (layers < 1) throw v.fail("\"model.num_hidden_layers\" is " + layers + "; it must be the checkpoint's layer count (≥ 1)");
        var model = new DumpManifest.Model(m.path("model_type").asText(null), layers, configSha, weightsSha);

        JsonNode tk = root.get("tokens");
        if (tk == null || !tk.isArray() || tk.isEmpty()) throw v.fail("\"tokens\" must be a non-empty array of token ids");
        var tokens = new ArrayList<Integer>(tk.size());
        for (int i = 0; i < tk.size(); i++) {
            JsonNode t = tk.get(i);
            if (!t.isIntegralNumber() || !t.canConvertToInt() || t.asInt() < 0)
                throw v.fail("tokens[" + i + "] = " + t + " is not a token id (a non-negative integer)");
            tokens.add(t.asInt());
        }
        JsonNode pl = root.get("prompt_length");
        if (pl == null || !pl.isIntegralNumber()) throw v.fail("\"prompt_length\" is missing or not an integer");
        int promptLength = pl.asInt();
        if (promptLength < 1 || promptLength > tokens.size())
            throw v.fail("prompt_length " + promptLength + " must be between 1 and the " + tokens.size() + " tokens");

        JsonNode sn = root.get("steps");
        if (sn == null || !sn.isArray()) throw v.fail("\"steps\" is missing or not an array");
        if (sn.isEmpty()) throw v.fail("\"steps\" is empty (did the producer stop before step 0?); re-create the dump");
        var steps = new ArrayList<DumpManifest.Step>();
        var files = new java.util.HashSet<String>();
        int expectStart = 0;
        for (int i = 0; i < sn.size(); i++) {
            JsonNode s = sn.get(i);
            String at = "steps[" + i + "]";
            if (!s.isObject()) throw v.fail(at + " is not an object");
            int index = v.integer(s, at + ".index", "index");
            int start = v.integer(s, at + ".start", "start");
            int length = v.integer(s, at + ".length", "length");
            String file = v.text(s, "file", at + ".file");
            if (index != i)
                throw v.fail(at + ".index is " + index + "; steps must be listed in order with index 0, 1, 2, …"
                        + (index == i + 1 ? " (it looks like counting from 1: the prefill is step 0)" : ""));
            if (start != expectStart)
                throw v.fail(at + ".start is " + start + " but the previous steps end at position " + expectStart + "; steps must be contiguous"
                        + (start > expectStart ? " — a step is missing: " + (start - 1 == expectStart ? "position " + expectStart + " was" : "positions " + expectStart + "–" + (start - 1) + " were") + " fed by no listed step"
                        + " (every forward call is one step: the prompt's prefill, then one per decode token)" : ""));
            if (length < 1) throw v.fail(at + ".length is " + length + "; a step feeds at least one token");
            if (i == 0 && length != promptLength)
                throw v.fail("steps[0].length is " + length + " but prompt_length is " + promptLength + "; step 0 feeds the whole prompt"
                        + (length == 1 ? " (it looks like the prompt was fed one token per step: prefill it in one forward call, as the reference does)" : ""));
            if (start + length > tokens.size())
                throw v.fail(at + " feeds positions [" + start + ", " + (start + length) + ") but \"tokens\" has only " + tokens.size());
            if (file.isEmpty() || file.contains("/") || file.contains("\\") || file.equals("..") || file.equals("."))
                throw v.fail(at + ".file \"" + file + "\" must be a plain file name inside the dump folder");
            if (!files.add(file)) throw v.fail(at + ".file \"" + file + "\" is also named by an earlier step");
            Integer next = null;
            JsonNode nt = s.get("next_token");
            if (nt != null && !nt.isNull()) {
                if (!nt.isIntegralNumber() || nt.asInt() < 0) throw v.fail(at + ".next_token " + nt + " is not a token id");
                next = nt.asInt();
            }
            Double margin = null;
            JsonNode mg = s.get("top2_margin");
            if (mg != null && !mg.isNull()) {
                if (!mg.isNumber()) throw v.fail(at + ".top2_margin " + mg + " is not a number");
                margin = mg.asDouble();
            }
            steps.add(new DumpManifest.Step(index, start, length, file, next, margin));
            expectStart = start + length;
        }
        JsonNode done = root.get("complete");
        if (done != null && !done.isBoolean()) throw v.fail("\"complete\" is " + done + "; it is true (written last by the producer) or absent");
        return new DumpManifest(format, ver.asInt(), producer, model, tokens, promptLength, selectedPoints(v, root), steps,
                done != null && done.booleanValue());
    }

    private static List<String> selectedPoints(Check v, JsonNode root) {
        JsonNode sel = root.get("selected_points");
        if (sel == null || sel.isNull()) return null;
        if (!sel.isArray() || sel.isEmpty()) throw v.fail("\"selected_points\" must be a non-empty array of point globs, or absent");
        var globs = new ArrayList<String>();
        for (int i = 0; i < sel.size(); i++) {
            if (!sel.get(i).isTextual() || sel.get(i).asText().isBlank())
                throw v.fail("selected_points[" + i + "] = " + sel.get(i) + " is not a point glob (a non-empty string)");
            globs.add(sel.get(i).asText());
        }
        return globs;
    }

    private record Check(Path file) {
        BadInputException fail(String what) {
            return new BadInputException(file, what + (what.contains(";") ? "" : "; fix the manifest or re-create the dump"));
        }

        String text(JsonNode obj, String key) { return text(obj, key, key); }

        String text(JsonNode obj, String key, String label) {
            JsonNode n = obj.get(key);
            if (n == null || !n.isTextual()) throw fail("\"" + label + "\" is missing or not a string");
            return n.asText();
        }

        int integer(JsonNode obj, String label, String key) {
            JsonNode n = obj.get(key);
            if (n == null || !n.isIntegralNumber() || !n.canConvertToInt()) throw fail("\"" + label + "\" is missing or not an integer");
            return n.asInt();
        }

        String sha(JsonNode obj, String label, JsonNode n, boolean nullable) {
            if (n == null || n.isNull()) {
                if (nullable) return null;
                throw fail("\"" + label + "\" is missing (sha256 of the checkpoint's config.json bytes)");
            }
            if (!n.isTextual() || !n.asText().matches("[0-9a-fA-F]{64}"))
                throw fail("\"" + label + "\" is not a sha256 hex digest: " + n);
            return n.asText().toLowerCase(java.util.Locale.ROOT);
        }
    }
}
