package dev.decodiff.harness.fuzz;

import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.cli.CliTest;
import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.metal.SafetensorsFile;
import dev.decodiff.metal.SafetensorsWriter;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Fuzzing of the readers: a clean candidate dump is mutated (the bad inputs found by hand are the seed corpus,
 * {@link Seed}; random byte flips, truncations and JSON edits are generated around them) and compared against the
 * clean reference through the CLI. The outcome must be a clean error (exit 2, one line, no "internal error"), an
 * incomplete (3) or a divergence (1) — never a crash, a hang, or exit 0 when the mutation changed the dump's
 * structure. Bounded for CI by jqwik.tries.default in junit-platform.properties (well under a minute on two
 * cores); a longer run raises it on the command line (docs/dump-format.md, "Fuzzing").
 */
class ReaderFuzzTest {
    private static final long HANG_SECONDS = 20;

    static Path root, ref, clean;

    @BeforeContainer
    static void corpus() throws IOException {
        root = Files.createTempDirectory("decodiff-fuzz");
        ref = SyntheticDump.write(root.resolve("ref"), SyntheticDump.NONE);
        clean = SyntheticDump.write(root.resolve("clean"), SyntheticDump.NONE);
        // Step files without __metadata__: then every header byte is structure (names, dtypes, shapes, offsets,
        // padding), and a flip anywhere in it must show.
        for (int s = 0; s < SyntheticDump.STEPS; s++) {
            Path f = clean.resolve(String.format("step-%04d.safetensors", s));
            var w = new SafetensorsWriter();
            try (var sf = SafetensorsFile.open(f)) {
                for (var t : sf.tensors().values()) w.add(t.name(), t.shape().clone(), t.toFloats());
            }
            w.write(f, Map.of());
        }
    }

    @AfterContainer
    static void cleanUp() { delete(root); }

    // ------------------------------------------------------------------ the outcome contract

    record Outcome(int code, String out, String err) {}

    /** Compares the mutated copy against the reference, in-process, with a watchdog against hangs. */
    static Outcome compare(Path cand) { return compare(ref, cand); }

    /** Compares two dumps (the candidate deleted afterwards, and the reference too unless it is the shared one). */
    static Outcome compare(Path reference, Path cand) {
        var ex = Executors.newSingleThreadExecutor(r -> { var t = new Thread(r, "fuzz-compare"); t.setDaemon(true); return t; });
        try {
            var f = ex.submit(() -> CliTest.run("compare", reference.toString(), cand.toString()));
            var r = f.get(HANG_SECONDS, TimeUnit.SECONDS);
            net.jqwik.api.statistics.Statistics.label("exit").collect(r.code());
            return new Outcome(r.code(), r.out(), r.err());
        } catch (TimeoutException e) {
            throw new AssertionError("compare hung (> " + HANG_SECONDS + " s) on " + cand);
        } catch (InterruptedException | ExecutionException e) {
            throw new AssertionError("compare crashed on " + cand, e);
        } finally {
            ex.shutdownNow();
            delete(cand); // thousands of tries must not pile up copies in the temp folder
            if (!reference.equals(ref)) delete(reference);
        }
    }

    static void delete(Path tree) {
        try (Stream<Path> s = Files.walk(tree)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Handled: a verdict or a clean bad-input line; never an internal error. */
    static void assertHandled(Outcome o, String what) {
        assertThat(o.code()).as(what + "\n" + o.err()).isIn(0, 1, 2, 3);
        assertThat(o.err()).as(what).doesNotContain("internal error").doesNotContain("Exception in");
        if (o.code() == 2) assertThat(o.err().strip().lines()).as(what + "\n" + o.err()).hasSize(1);
    }

    /** A structural mutation must not pass. */
    static void assertNotAMatch(Outcome o, String what) {
        assertHandled(o, what);
        assertThat(o.code()).as(what + " passed as a match:\n" + o.out()).isNotZero();
        assertThat(o.out()).as(what).doesNotContain("MATCH");
    }

    static Path freshCopy() {
        try {
            Path d = Files.createTempDirectory(root, "cand");
            try (var s = Files.list(clean)) {
                for (Path p : s.toList()) Files.copy(p, d.resolve(p.getFileName()));
            }
            return d;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Path step(Path d, int s) { return d.resolve(String.format("step-%04d.safetensors", s)); }

    static long headerLength(Path f) throws IOException {
        byte[] b = Files.readAllBytes(f);
        return ByteBuffer.wrap(b, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    // ------------------------------------------------------------------ seeds: the bad inputs found by hand

    /** The issue's bad inputs, each a mutation of a clean dump that must not pass. */
    enum Seed {
        KILLED_AFTER_TWO_STEPS, EMPTY_HEADER, NON_UTF8_NAME, FEWER_LAYERS_DECLARED, DUPLICATE_TENSOR, DUPLICATE_STEPS_KEY,
        LINK_OUT_OF_FOLDER, OVERFLOWING_SHAPE, UNMARKED, STEP_FILE_MISSING, TRUNCATED_DATA, HEADER_LENGTH_HUGE;

        void apply(Path d) throws IOException {
            Path mf = d.resolve("manifest.json");
            String m = Files.readString(mf);
            switch (this) {
                case KILLED_AFTER_TWO_STEPS -> {
                    Files.delete(step(d, 2));
                    Files.delete(step(d, 3));
                    int cut = m.indexOf("}, {", m.indexOf("\"step-0001.safetensors\""));
                    int end = m.lastIndexOf(']');
                    Files.writeString(mf, m.substring(0, cut + 1) + "\n  " + m.substring(end));
                    SyntheticDump.editManifest(d, "\"complete\" : true", "\"complete\" : false");
                }
                case EMPTY_HEADER -> SyntheticDump.writeRaw(step(d, 1), "{}", 0);
                case NON_UTF8_NAME -> SyntheticDump.replaceByte(step(d, 2), "final_norm", 5, 0xff);
                case FEWER_LAYERS_DECLARED -> Files.writeString(mf, m.replace("\"num_hidden_layers\" : 3", "\"num_hidden_layers\" : 1"));
                case DUPLICATE_TENSOR -> SyntheticDump.writeRaw(step(d, 0), "{\"logits\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                        + "\"logits\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16);
                case DUPLICATE_STEPS_KEY -> Files.writeString(mf, m.replaceFirst("\"steps\" :", "\"steps\" : [ ],\n  \"steps\" :"));
                case LINK_OUT_OF_FOLDER -> {
                    Path outside = Files.createTempFile(root, "outside", ".safetensors");
                    Files.copy(step(d, 1), outside, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                    Files.delete(step(d, 1));
                    Files.createSymbolicLink(step(d, 1), outside);
                }
                case OVERFLOWING_SHAPE -> SyntheticDump.writeRaw(step(d, 3), "{\"logits\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8);
                case UNMARKED -> SyntheticDump.editManifest(d, "\"complete\" : true", "\"complete\" : false");
                case STEP_FILE_MISSING -> Files.delete(step(d, 2));
                case TRUNCATED_DATA -> {
                    byte[] b = Files.readAllBytes(step(d, 0));
                    Files.write(step(d, 0), java.util.Arrays.copyOf(b, b.length - 3));
                }
                case HEADER_LENGTH_HUGE -> {
                    byte[] b = Files.readAllBytes(step(d, 1));
                    ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putLong(0, Long.MAX_VALUE);
                    Files.write(step(d, 1), b);
                }
            }
        }
    }

    @Property(tries = 24)
    void everySeedOfTheCorpusIsRefusedOrIncompleteNeverAMatch(@ForAll Seed seed) throws IOException {
        Path d = freshCopy();
        seed.apply(d);
        assertNotAMatch(compare(d), "seed " + seed);
    }

    // ------------------------------------------------------------------ step files

    record HeaderFlip(int step, double where, int value) {}

    @Provide
    Arbitrary<HeaderFlip> headerFlips() {
        return Combinators.combine(Arbitraries.integers().between(0, SyntheticDump.STEPS - 1), Arbitraries.doubles().between(0, 1),
                Arbitraries.integers().between(0, 255)).as(HeaderFlip::new);
    }

    private static boolean jsonSpace(int b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }

    /** One byte of a step file's header (or its length field) replaced: structure changed, so never a match. */
    @Property
    void aFlippedHeaderByteIsNeverAMatch(@ForAll("headerFlips") HeaderFlip flip) throws IOException {
        Path d = freshCopy(), f = step(d, flip.step());
        byte[] b = Files.readAllBytes(f);
        long n = headerLength(f);
        int at = (int) Math.min(8 + n - 1, Math.floor(flip.where() * (8 + n)));
        byte was = b[at];
        // the same byte, or whitespace for whitespace (padding), leaves the header as it was: not a mutation
        if (was == (byte) flip.value() || (jsonSpace(was) && jsonSpace(flip.value()))) return;
        b[at] = (byte) flip.value();
        Files.write(f, b);
        assertNotAMatch(compare(d), "byte " + at + " of " + f.getFileName() + " from " + (was & 0xff) + " to " + flip.value());
    }

    /** A step file cut anywhere (a kill mid-write without the atomic rename, a full disk): never a match. */
    @Property
    void aTruncatedStepFileIsNeverAMatch(@ForAll("steps") int s, @ForAll("fractions") double keep) throws IOException {
        Path d = freshCopy(), f = step(d, s);
        byte[] b = Files.readAllBytes(f);
        int len = (int) Math.floor(keep * b.length);
        Files.write(f, java.util.Arrays.copyOf(b, len));
        assertNotAMatch(compare(d), f.getFileName() + " cut to " + len + " of " + b.length + " bytes");
    }

    @Provide Arbitrary<Integer> steps() { return Arbitraries.integers().between(0, SyntheticDump.STEPS - 1); }

    @Provide Arbitrary<Double> fractions() { return Arbitraries.doubles().between(0, true, 1, false).ofScale(4); }

    // ------------------------------------------------------------------ manifest

    /** A structural edit of manifest.json: a required key removed or retyped, a step dropped or shifted. */
    record ManifestEdit(String path, String replacement) {}

    static final List<String> REQUIRED = List.of("\"format\"", "\"version\"", "\"model\"", "\"tokens\"", "\"prompt_length\"", "\"steps\"",
            "\"complete\"", "\"config_sha256\"", "\"num_hidden_layers\"", "\"index\"", "\"start\"", "\"length\"", "\"file\"");

    static final List<String> WRONG_VALUES = List.of("null", "\"\"", "\"x\"", "-1", "0", "2147483648", "1e400", "1.5", "[]", "{}", "true", "false",
            "[ 1, 2 ]", "\"step-0000.safetensors\"", "99");

    @Provide
    Arbitrary<ManifestEdit> manifestEdits() {
        return Combinators.combine(Arbitraries.of(REQUIRED), Arbitraries.of(WRONG_VALUES)).as(ManifestEdit::new);
    }

    /** Replaces the value of the nth occurrence of a required key (steps repeat index/start/length/file). */
    @Property
    void aRequiredManifestValueReplacedIsNeverAMatch(@ForAll("manifestEdits") ManifestEdit e, @ForAll("occurrences") int nth) throws IOException {
        Path d = freshCopy(), mf = d.resolve("manifest.json");
        String m = Files.readString(mf);
        if (e.path().equals("\"version\"") && nth > 0) return; // later ones are the producer's free-form version
        int at = -1;
        for (int i = 0; i <= nth; i++) {
            int next = m.indexOf(e.path() + " : ", at + 1);
            if (next < 0) break;
            at = next;
        }
        if (at < 0) return;
        int vStart = at + e.path().length() + 3;
        int vEnd = valueEnd(m, vStart);
        String old = m.substring(vStart, vEnd).strip();
        if (old.equals(e.replacement())) return; // not a change
        Files.writeString(mf, m.substring(0, vStart) + e.replacement() + m.substring(vEnd));
        assertNotAMatch(compare(d), e.path() + " #" + nth + ": " + old + " → " + e.replacement());
    }

    @Provide Arbitrary<Integer> occurrences() { return Arbitraries.integers().between(0, 3); }

    /** The end of the JSON value starting at i (balanced brackets, strings skipped). */
    static int valueEnd(String s, int i) {
        int depth = 0;
        boolean str = false;
        for (int j = i; j < s.length(); j++) {
            char c = s.charAt(j);
            if (str) {
                if (c == '\\') j++;
                else if (c == '"') str = false;
                continue;
            }
            if (c == '"') str = true;
            else if (c == '[' || c == '{') depth++;
            else if (c == ']' || c == '}') {
                if (depth == 0) return j;
                depth--;
            } else if (c == ',' && depth == 0) return j;
        }
        return s.length();
    }

    /** Any byte of manifest.json replaced: whatever it does to the meaning, the outcome is handled, never a crash. */
    @Property
    void anyManifestByteFlipIsHandled(@ForAll("fractions") double where, @ForAll("bytes") int value) throws IOException {
        Path d = freshCopy(), mf = d.resolve("manifest.json");
        byte[] b = Files.readAllBytes(mf);
        int at = (int) Math.floor(where * b.length);
        b[at] = (byte) value;
        Files.write(mf, b);
        assertHandled(compare(d), "manifest byte " + at + " → " + value);
    }

    @Provide Arbitrary<Integer> bytes() { return Arbitraries.integers().between(0, 255); }

    // ------------------------------------------------------------------ readers directly

    /** The safetensors reader alone: any header text gives a file or a SafetensorsException, nothing else. */
    @Property
    void anySafetensorsHeaderIsReadOrRefusedCleanly(@ForAll("headers") String header, @ForAll("smallSizes") int dataBytes) throws IOException {
        Path f = Files.createTempFile(root, "h", ".safetensors");
        SyntheticDump.writeRaw(f, header, dataBytes);
        try (var sf = SafetensorsFile.open(f)) {
            assertThat(sf.names()).isNotNull();
        } catch (dev.decodiff.metal.SafetensorsException ok) {
            assertThat(ok.getMessage()).contains(f.toString());
        } finally {
            Files.delete(f);
        }
    }

    @Provide
    Arbitrary<String> headers() {
        var names = Arbitraries.of("logits", "embed", "layers.0.out", "__metadata__", "", "é", "\u0000", "layers.99999999999.out");
        var dtypes = Arbitraries.of("F32", "BF16", "F16", "I32", "F64", "U8", "", "f32", "BOOL");
        var dims = Arbitraries.of("0", "1", "2", "16", "-1", "4294967296", "9223372036854775807", "1.5", "\"2\"", "null", "1e3");
        var dimList = dims.list().ofMaxSize(4).map(l -> "[" + String.join(",", l) + "]");
        var offs = Arbitraries.of("[0,0]", "[0,8]", "[0,64]", "[8,0]", "[-8,0]", "[0]", "[0,8,16]", "\"0,8\"", "[0,9223372036854775807]", "[1.5,8]");
        var entry = Combinators.combine(names, dtypes, dimList, offs)
                .as((n, t, s, o) -> "\"" + n + "\":{\"dtype\":\"" + t + "\",\"shape\":" + s + ",\"data_offsets\":" + o + "}");
        var structured = entry.list().ofMaxSize(3).map(l -> "{" + String.join(",", l) + "}");
        var junk = Arbitraries.strings().ofMaxLength(40);
        return Arbitraries.oneOf(structured, structured, junk, Arbitraries.of("{}", "[]", "null", "{\"a\":1}{}", "{\"x\":{}}", "{\"x\":[]}"));
    }

    @Provide Arbitrary<Integer> smallSizes() { return Arbitraries.of(0, 4, 8, 16, 64); }

    /** The tolerance-profile reader: any text gives a profile or a one-line BadInputException naming the file. */
    @Property
    void anyToleranceProfileIsLoadedOrRefusedCleanly(@ForAll("profiles") String text) throws IOException {
        Path f = Files.createTempFile(root, "p", ".json");
        Files.writeString(f, text);
        try {
            var p = ToleranceProfile.load(f);
            assertThat(p.tolerance("logits")).isPositive().isFinite();
        } catch (BadInputException ok) {
            assertThat(ok.getMessage()).contains(f.toString()).doesNotContain("\n");
        } finally {
            Files.delete(f);
        }
    }

    @Provide
    Arbitrary<String> profiles() {
        var keys = Arbitraries.of("default", "near_tie", "points", "defualt", "point", "", "logits", "attn.out", "layers.1.*", "*", "layers.x.out");
        var values = Arbitraries.of("1e-4", "0", "-1", "1e400", "NaN", "\"1e-4\"", "null", "true", "{}", "[]", "{\"logits\": 2e-4}",
                "{\"layers.*.attn.out\": 1e-3}", "{\"nope\": 1}", "{\"logits\": -1}", "{\"logits\": \"big\"}", "{\"*\": 1}");
        var pair = Combinators.combine(keys, values).as((k, v) -> "\"" + k + "\": " + v);
        var structured = pair.list().ofMaxSize(4).map(l -> "{" + String.join(", ", l) + "}");
        return Arbitraries.oneOf(structured, structured, structured, Arbitraries.strings().ofMaxLength(30));
    }

    // ------------------------------------------------------------------ pairs: the same damage on both sides

    /*
     * Two runs of one faulty producer are broken the same way: compared with each other every cell agrees, so only
     * the format's own rules, applied to each side, can stop them passing. The same damage on a copy as reference and
     * on a copy as candidate must never exit 0.
     */

    @Property(tries = 12)
    void everySeedOnBothSidesIsNeverAMatch(@ForAll Seed seed) throws IOException {
        Path r = freshCopy(), c = freshCopy();
        seed.apply(r);
        seed.apply(c);
        assertNotAMatch(compare(r, c), "seed " + seed + " on both sides");
    }

    @Property(tries = 30)
    void aHeaderByteFlippedOnBothSidesIsNeverAMatch(@ForAll("headerFlips") HeaderFlip flip) throws IOException {
        Path r = freshCopy(), c = freshCopy();
        Path fr = step(r, flip.step()), fc = step(c, flip.step());
        byte[] b = Files.readAllBytes(fc);
        long n = headerLength(fc);
        int at = (int) Math.min(8 + n - 1, Math.floor(flip.where() * (8 + n)));
        byte was = b[at];
        if (was == (byte) flip.value() || (jsonSpace(was) && jsonSpace(flip.value()))) {
            delete(r);
            delete(c);
            return;
        }
        b[at] = (byte) flip.value();
        Files.write(fc, b);
        Files.write(fr, b);
        assertNotAMatch(compare(r, c), "byte " + at + " of " + fc.getFileName() + " from " + (was & 0xff) + " to " + flip.value() + " on both sides");
    }

    @Property(tries = 10)
    void aStepFileTruncatedOnBothSidesIsNeverAMatch(@ForAll("steps") int s, @ForAll("fractions") double keep) throws IOException {
        Path r = freshCopy(), c = freshCopy();
        byte[] b = Files.readAllBytes(step(c, s));
        int len = (int) Math.floor(keep * b.length);
        Files.write(step(c, s), java.util.Arrays.copyOf(b, len));
        Files.write(step(r, s), java.util.Arrays.copyOf(b, len));
        assertNotAMatch(compare(r, c), "step " + s + " cut to " + len + " of " + b.length + " bytes on both sides");
    }

    @Property(tries = 30)
    void aRequiredManifestValueReplacedOnBothSidesIsNeverAMatch(@ForAll("manifestEdits") ManifestEdit e, @ForAll("occurrences") int nth) throws IOException {
        Path r = freshCopy(), c = freshCopy();
        String m = Files.readString(c.resolve("manifest.json"));
        int at = -1;
        for (int i = 0; i <= nth; i++) {
            int next = m.indexOf(e.path() + " : ", at + 1);
            if (next < 0) break;
            at = next;
        }
        int vStart = at + e.path().length() + 3, vEnd = at < 0 ? -1 : valueEnd(m, vStart);
        if (at < 0 || (e.path().equals("\"version\"") && nth > 0) || m.substring(vStart, vEnd).strip().equals(e.replacement())) {
            delete(r);
            delete(c);
            return;
        }
        String edited = m.substring(0, vStart) + e.replacement() + m.substring(vEnd);
        Files.writeString(c.resolve("manifest.json"), edited);
        Files.writeString(r.resolve("manifest.json"), edited);
        assertNotAMatch(compare(r, c), e.path() + " #" + nth + " → " + e.replacement() + " on both sides");
    }

    /** A tensor-level breach of the format's rules (§3), made by the producer itself, so both runs carry it. */
    enum Damage {
        EMPTY_AXIS, ROWS_OFF_BY_ONE, WIDTH_CHANGES, READ_TOO_LONG, WINDOW_CHANGES, POINT_MISSING_FROM_ONE_STEP, ALL_ZEROS, RANK_CHANGED;

        SyntheticDump.Mutation at(int step, String chosen) {
            // a window is a read's property: on another point, the damage goes to layer 0's keys read
            String point = this == WINDOW_CHANGES && !chosen.endsWith("_read") ? "layers.0.attn.k_read" : chosen;
            // one position fewer at the last step alone is a window (of p): a later step must read more than it
            int at = this == WINDOW_CHANGES ? Math.min(step, SyntheticDump.STEPS - 2) : step;
            return (s, t) -> {
                if (s != at || !t.containsKey(point)) return;
                var ct = t.get(point);
                long[] shape = ct.shape().clone();
                switch (this) {
                    case EMPTY_AXIS -> {
                        shape[shape.length - 1] = 0;
                        put(t, point, shape);
                    }
                    case ROWS_OFF_BY_ONE -> {
                        shape[0] += point.equals("logits") ? -1 : 1;
                        put(t, point, shape);
                    }
                    case WIDTH_CHANGES -> {
                        if (shape.length < 2) shape[0] += 1;
                        else shape[shape.length - 1] += 1;
                        put(t, point, shape);
                    }
                    case READ_TOO_LONG -> {
                        if (!point.endsWith("_read")) shape = new long[]{shape[0] + 1};
                        else shape[0] = ct.shape()[0] + 1;
                        put(t, point, shape);
                    }
                    case WINDOW_CHANGES -> { // one step reads one position fewer than the others: no single window W
                        shape[0] -= 1;
                        put(t, point, shape);
                    }
                    case POINT_MISSING_FROM_ONE_STEP -> t.remove(point);
                    case ALL_ZEROS -> java.util.Arrays.fill(ct.data(), 0f);
                    case RANK_CHANGED -> put(t, point, java.util.stream.LongStream.concat(java.util.Arrays.stream(shape), java.util.stream.LongStream.of(1)).toArray());
                }
            };
        }

        private static void put(Map<String, dev.decodiff.harness.dump.CapturedTensor> t, String point, long[] shape) {
            long n = 1;
            for (long d : shape) n *= d;
            t.put(point, new dev.decodiff.harness.dump.CapturedTensor(point, shape, new float[(int) n]));
            if (point.equals("logits") && n > 0) t.get(point).data()[0] = 1; // SyntheticDump reads the greedy token from them
        }
    }

    @Provide
    Arbitrary<String> points() {
        var names = new java.util.ArrayList<>(SyntheticDump.step(0, 0, SyntheticDump.PROMPT).keySet());
        return Arbitraries.of(names);
    }

    @Property(tries = 40)
    void aTensorRuleBrokenOnBothSidesIsNeverAMatch(@ForAll Damage damage, @ForAll("steps") int s, @ForAll("points") String point) {
        if (damage == Damage.EMPTY_AXIS && point.equals("logits")) point = "final_norm"; // the synthetic writer needs a greedy token
        var m = damage.at(s, point);
        Path r = SyntheticDump.write(root.resolve("pair-ref-" + System.nanoTime()), m);
        Path c = SyntheticDump.write(root.resolve("pair-cand-" + System.nanoTime()), m);
        assertNotAMatch(compare(r, c), damage + " of " + point + " at step " + s + " on both sides");
    }

    // ------------------------------------------------------------------ the terminal

    /** Where a hostile string from input can land: a tensor name, a producer string, the model type, a step file's name. */
    enum Place { TENSOR_NAME, PRODUCER_NAME, MODEL_TYPE, STEP_FILE_NAME, SELECTED_POINT }

    @Provide
    Arbitrary<String> hostile() {
        var controls = Arbitraries.of("\u001b[2J", "\u001b]0;title\u0007", "\u0007", "\u0000", "\u202e", "\u2066", "\u200f", "\u009b31m", "\u007f",
                "\r", "\t", "\u2028", "\u0085", "\ufeff", "\u001b[31m", "\b");
        var text = Arbitraries.strings().alpha().ofMaxLength(6);
        return Combinators.combine(text, controls.list().ofMinSize(1).ofMaxSize(4), text)
                .as((a, cs, b) -> "my." + a + String.join(b, cs) + b);
    }

    /**
     * Whatever control or format character a dump carries, and wherever, validate, inspect and compare print it
     * escaped: nothing that could steer a terminal reaches stdout or stderr raw (line breaks aside, which the
     * commands write themselves), with colour on as well as off.
     */
    @Property(tries = 30)
    void noControlCharacterFromInputReachesTheTerminal(@ForAll("hostile") String evil, @ForAll Place place) throws IOException {
        SyntheticDump.Mutation named = place == Place.TENSOR_NAME
                ? (st, t) -> t.put(evil, new dev.decodiff.harness.dump.CapturedTensor(evil, new long[]{2}, new float[]{1, st + 1}))
                : SyntheticDump.NONE;
        Path r = SyntheticDump.write(root.resolve("term-ref-" + System.nanoTime()), named);
        Path c = SyntheticDump.write(root.resolve("term-cand-" + System.nanoTime()), place == Place.TENSOR_NAME
                ? (st, t) -> t.put(evil, new dev.decodiff.harness.dump.CapturedTensor(evil, new long[]{2}, new float[]{1, st + 2}))
                : SyntheticDump.NONE);
        String json = new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(evil);
        switch (place) {
            case TENSOR_NAME -> {}
            case PRODUCER_NAME -> SyntheticDump.editManifest(c, "\"name\" : \"synthetic\"", "\"name\" : " + json);
            case MODEL_TYPE -> SyntheticDump.editManifest(c, "\"model_type\" : \"gemma4_text\"", "\"model_type\" : " + json);
            case STEP_FILE_NAME -> {
                String file = evil.replace("\u0000", "").replace("/", "") + ".safetensors";
                String fileJson = new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(file);
                Files.move(step(c, 1), c.resolve(file));
                SyntheticDump.editManifest(c, "\"step-0001.safetensors\"", fileJson);
                Files.delete(step(c, 2)); // a missing step file beside it: an error line that names the folder
            }
            case SELECTED_POINT -> SyntheticDump.selectPoints(c, evil);
        }
        try {
            for (String[] args : new String[][]{{"validate", c.toString()}, {"inspect", c.toString()}, {"compare", r.toString(), c.toString()},
                    {"inspect", step(r, 0).toString()}}) {
                var o = CliTest.run(args);
                String what = String.join(" ", args).replace(evil, "<evil>") + " with " + place;
                assertThat(o.code()).as(what + "\n" + o.err()).isIn(0, 1, 2, 3);
                assertNoRawControl(o.out(), what + " (stdout)");
                assertNoRawControl(o.err(), what + " (stderr)");
            }
            if (place == Place.TENSOR_NAME) {
                String coloured = dev.decodiff.harness.report.TerminalReport.render(
                        dev.decodiff.harness.compare.Comparison.compareDumps(r, c, dev.decodiff.harness.compare.Comparison.Options.defaults()), true);
                assertNoRawControl(coloured.replaceAll("\u001b\\[[0-9;]*m", ""), "the coloured report");
            }
        } finally {
            delete(r);
            delete(c);
        }
    }

    static void assertNoRawControl(String text, String what) {
        text.codePoints().filter(ch -> ch != '\n').forEach(ch ->
                assertThat(dev.decodiff.harness.Printable.needsEscape(ch)).as("%s prints U+%04X raw", what, ch).isFalse());
    }
}
