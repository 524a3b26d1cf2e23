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
    static Outcome compare(Path cand) {
        var ex = Executors.newSingleThreadExecutor(r -> { var t = new Thread(r, "fuzz-compare"); t.setDaemon(true); return t; });
        try {
            var f = ex.submit(() -> CliTest.run("compare", ref.toString(), cand.toString()));
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
}
