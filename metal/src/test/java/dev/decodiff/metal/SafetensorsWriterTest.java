package dev.decodiff.metal;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

class SafetensorsWriterTest {
    @TempDir
    Path dir;

    private static float[] ramp(int n, float scale) {
        var a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (i - n / 2f) * scale;
        return a;
    }

    @Test
    void aSpilledFileIsByteForByteTheFileWrittenFromTheHeapAndLeavesNoSpillBehind() throws Exception {
        // One tensor larger than the 4 MiB write buffer, so the spill crosses buffer boundaries.
        float[] a = ramp(3, 0.5f), b = ramp(1_200_001, 1e-3f), c = ramp(17, -2f);
        var heap = new SafetensorsWriter().add("a", new long[]{3}, a).add("b", new long[]{1_200_001}, b).add("c", new long[]{1, 17}, c);
        heap.write(dir.resolve("heap.safetensors"), Map.of("format", "x"));
        Path spill = dir.resolve("spill.data.partial");
        try (var spilled = SafetensorsWriter.spillingTo(spill)) {
            spilled.add("a", new long[]{3}, a).add("b", new long[]{1_200_001}, b).add("c", new long[]{1, 17}, c);
            spilled.write(dir.resolve("spilled.safetensors"), Map.of("format", "x"));
        }
        assertThat(Files.mismatch(dir.resolve("heap.safetensors"), dir.resolve("spilled.safetensors"))).isEqualTo(-1);
        assertThat(spill).doesNotExist();
        try (var f = SafetensorsFile.open(dir.resolve("spilled.safetensors"))) {
            assertThat(f.names()).containsExactlyInAnyOrder("a", "b", "c");
            assertThat(f.get("b").toFloats()).isEqualTo(b);
            assertThat(f.get("c").shape()).containsExactly(1, 17);
        }
    }

    @Test
    void anAbandonedSpillingWriterRemovesItsSpillFile() throws Exception {
        Path spill = dir.resolve("step.data.partial");
        try (var w = SafetensorsWriter.spillingTo(spill)) {
            w.add("x", new long[]{2}, new float[]{1, 2});
            assertThat(spill).exists();
        }
        assertThat(spill).doesNotExist();
        try (var files = Files.list(dir)) {
            assertThat(files).isEmpty();
        }
    }
}
