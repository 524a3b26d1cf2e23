package dev.decodiff.tests;

import dev.decodiff.harness.dump.CapturedTensor;
import dev.decodiff.metal.SafetensorsFile;
import dev.decodiff.metal.SafetensorsWriter;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;

/** Copies real dumps and edits them, to plant faults and bad input in data transformers actually wrote. */
final class DumpSurgery {
    private DumpSurgery() {}

    static Path copy(Path src, Path dst) {
        try {
            Files.createDirectories(dst);
            try (var s = Files.list(src)) {
                for (Path p : s.toList()) Files.copy(p, dst.resolve(p.getFileName()));
            }
            return dst;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Rewrites step s of a dump folder after editing its tensors (name → tensor, in file order). */
    static void editStep(Path dir, int s, Consumer<Map<String, CapturedTensor>> edit) {
        Path f = dir.resolve(String.format("step-%04d.safetensors", s));
        var tensors = new LinkedHashMap<String, CapturedTensor>();
        try (var sf = SafetensorsFile.open(f)) {
            for (var t : sf.tensors().values()) tensors.put(t.name(), new CapturedTensor(t.name(), t.shape().clone(), t.toFloats()));
        }
        edit.accept(tensors);
        var w = new SafetensorsWriter();
        for (var t : tensors.values()) w.add(t.point(), t.shape(), t.data());
        try {
            w.write(f, Map.of());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void editManifest(Path dir, java.util.function.UnaryOperator<String> edit) {
        Path mf = dir.resolve("manifest.json");
        try {
            String before = Files.readString(mf), after = edit.apply(before);
            if (before.equals(after)) throw new IllegalStateException("manifest edit changed nothing in " + mf);
            Files.writeString(mf, after);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
