package dev.decodiff.harness.dump;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.metal.SafetensorsWriter;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;

/**
 * Writes a dump v1 step by step. Each step file is written atomically, then manifest.json is rewritten atomically
 * to list it, so a producer that crashes keeps every step written so far as a readable dump. {@link #finish()} sets
 * the manifest's completeness mark as the very last write: a dump cut short never carries it, and a comparison
 * against it says "incomplete" instead of passing on the steps that happen to be there.
 */
public final class DumpWriter {
    static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private final Path dir;
    private DumpManifest manifest;
    private final List<DumpManifest.Step> steps = new ArrayList<>();

    private DumpWriter(Path dir, DumpManifest manifest) {
        this.dir = dir;
        this.manifest = manifest;
    }

    /**
     * Prepares {@code dir} (created if absent). A non-empty folder is refused unless {@code force}, which removes
     * the dump files there (manifest.json, step-*.safetensors, leftovers of an interrupted write) and nothing else.
     */
    public static DumpWriter create(Path dir, boolean force, DumpManifest.Producer producer, DumpManifest.Model model,
                                    List<Integer> tokens, int promptLength) {
        return create(dir, force, producer, model, tokens, promptLength, null);
    }

    /** As above, recording the user's explicit point selection (globs; null = every point). */
    public static DumpWriter create(Path dir, boolean force, DumpManifest.Producer producer, DumpManifest.Model model,
                                    List<Integer> tokens, int promptLength, List<String> selectedPoints) {
        try {
            if (Files.exists(dir) && !Files.isDirectory(dir))
                throw new BadInputException(dir, "is a file; --out needs a folder (new or empty)");
            if (Files.isDirectory(dir)) {
                List<Path> present;
                try (var s = Files.list(dir)) { present = s.toList(); }
                if (!present.isEmpty()) {
                    if (!force)
                        throw new BadInputException(dir, "is not empty (" + present.size() + " entries); choose a new folder or pass --force to replace the dump there");
                    for (Path p : present) {
                        String n = p.getFileName().toString();
                        if (n.equals(DumpManifest.FILE_NAME) || n.endsWith(".partial") || n.matches("step-\\d+\\.safetensors"))
                            Files.delete(p);
                    }
                }
            }
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw new BadInputException(dir, "cannot prepare the output folder: " + e.getMessage(), e);
        }
        var w = new DumpWriter(dir, new DumpManifest(DumpManifest.FORMAT, DumpManifest.VERSION, producer, model,
                tokens, promptLength, selectedPoints, List.of(), false));
        w.writeManifest();
        return w;
    }

    public Path dir() { return dir; }

    public int stepsWritten() { return steps.size(); }

    public DumpManifest manifest() { return manifest; }

    /** Updates the token list (free-running generation appends its tokens as it goes). */
    public void setTokens(List<Integer> tokens) { manifest = manifest.withTokens(tokens); }

    /** Writes the next step's tensors, then the manifest that lists it. */
    public void writeStep(int start, int length, Collection<CapturedTensor> tensors, Integer nextToken, Double top2Margin) {
        try (var step = new StepWriter(new SafetensorsWriter())) {
            for (var t : tensors) step.add(t);
            step.commit(start, length, nextToken, top2Margin);
        }
    }

    /**
     * The next step, written tensor by tensor as the engine produces them: each goes to disk at once, so a step of any
     * size costs the heap one tensor. {@link StepWriter#commit} writes the step file and the manifest that lists it;
     * closing a step that was not committed (the engine threw) leaves nothing behind.
     */
    public StepWriter beginStep() {
        Path spill = dir.resolve(DumpManifest.stepFileName(steps.size()) + ".data.partial");
        try {
            return new StepWriter(SafetensorsWriter.spillingTo(spill));
        } catch (IOException e) {
            throw new UncheckedIOException(spill + ": cannot write: " + e.getMessage(), e);
        }
    }

    /** One step being written; see {@link #beginStep}. */
    public final class StepWriter implements AutoCloseable {
        private final SafetensorsWriter writer;

        private StepWriter(SafetensorsWriter writer) { this.writer = writer; }

        public void add(CapturedTensor t) { writer.add(t.point(), t.shape(), t.data()); }

        public boolean isEmpty() { return writer.isEmpty(); }

        /** Writes the step file, then the manifest that lists it. */
        public void commit(int start, int length, Integer nextToken, Double top2Margin) {
            int index = steps.size();
            String file = DumpManifest.stepFileName(index);
            try {
                writer.write(dir.resolve(file), Map.of("format", "decodiff-dump", "step", Integer.toString(index)));
            } catch (IOException e) {
                throw new UncheckedIOException(dir.resolve(file) + ": cannot write: " + e.getMessage(), e);
            }
            if (top2Margin != null && !Double.isFinite(top2Margin)) top2Margin = null; // JSON has no NaN/Inf
            steps.add(new DumpManifest.Step(index, start, length, file, nextToken, top2Margin));
            manifest = manifest.withSteps(steps);
            writeManifest();
        }

        @Override
        public void close() {
            try {
                writer.close();
            } catch (IOException e) {
                throw new UncheckedIOException(dir + ": cannot remove a step's spill file: " + e.getMessage(), e);
            }
        }
    }

    /** Marks the dump complete: call once, after the last step; nothing may be written after it. */
    public void finish() {
        manifest = manifest.completed();
        writeManifest();
    }

    private void writeManifest() {
        Path mf = dir.resolve(DumpManifest.FILE_NAME);
        Path tmp = dir.resolve(DumpManifest.FILE_NAME + ".partial");
        try {
            Files.write(tmp, JSON.writeValueAsBytes(manifest));
            Files.move(tmp, mf, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw new UncheckedIOException(mf + ": cannot write: " + e.getMessage(), e);
        }
    }
}
