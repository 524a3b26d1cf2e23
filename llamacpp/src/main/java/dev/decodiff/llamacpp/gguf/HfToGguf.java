package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.metal.BFloat16;
import dev.decodiff.metal.TensorView;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;

/**
 * Converts a Hugging Face Gemma 4, Qwen3.5 or Llama-family (llama, mistral, qwen3) text checkpoint folder (config.json, *.safetensors, optionally the tokenizer)
 * into the GGUF llama.cpp's own conversion would write, in F32 (exact), BF16 or F16, or with Q8_0 / Q4_0 matrices
 * (ggml's reference quantizers, {@link GgmlQuants}).
 */
public final class HfToGguf {
    /** Changes whenever the files this converter writes change; a cache of converted files should key on it. */
    public static final int REVISION = 2;

    private HfToGguf() {}

    /** The plan of a checkpoint folder: metadata and tensor infos, no data read. */
    public static GgufPlan plan(Path dir, CheckpointFiles files, GgufOutputType type) {
        Path configFile = dir.resolve("config.json");
        if (!Files.isRegularFile(configFile)) throw new GgufException(dir, "has no config.json; is it a Hugging Face checkpoint folder?");
        JsonNode config;
        try {
            config = new ObjectMapper().readTree(configFile.toFile());
        } catch (IOException e) {
            throw new GgufException(configFile, "is not valid JSON: " + e.getMessage().lines().findFirst().orElse(""), e);
        }
        var headers = new ArrayList<Gemma4GgufPlan.HfTensor>();
        for (var t : files.all().values()) headers.add(new Gemma4GgufPlan.HfTensor(t.name(), t.dtype(), t.shape()));
        String name = dir.toAbsolutePath().normalize().getFileName().toString();
        if (Qwen35GgufPlan.isQwen35(config)) return Qwen35GgufPlan.of(name, config, configFile, headers, type);
        if (LlamaGgufPlan.isLlamaFamily(config)) return LlamaGgufPlan.of(name, config, configFile, headers, type);
        return Gemma4GgufPlan.of(name, config, configFile, headers, Gemma4Vocab.read(dir), type);
    }

    /** Writes the GGUF of a checkpoint folder; an existing {@code out} is replaced only when {@code force}. */
    public static GgufPlan convert(Path dir, Path out, GgufOutputType type, boolean force) {
        if (!force && Files.exists(out)) throw new GgufException(out, "already exists; pass --force to replace it");
        try (var files = CheckpointFiles.open(dir)) {
            var plan = plan(dir, files, type);
            var tensors = new ArrayList<GgufWriter.Tensor>();
            for (var p : plan.tensors()) tensors.add(new GgufWriter.Tensor(p.name(), p.ne(), p.type(), data(p, files)));
            GgufWriter.write(out, plan.metadata(), tensors, force);
            return plan;
        }
    }

    private static GgufWriter.TensorData data(Gemma4GgufPlan.Planned p, CheckpointFiles files) {
        if (p.values() != null) return sink -> writeChunk(sink, p.type(), p.values(), p.values().length);
        if (p.derived() != null) return derived(p, files);
        TensorView src = files.all().get(p.source());
        long n = p.elementCount();
        if (!src.dtype().isFloat()) throw new GgufException(files.dir(), "tensor '" + p.source() + "' is " + src.dtype() + ", not a float tensor");
        if (n > src.elementCount()) throw new IllegalStateException(p.name() + " plans more elements than " + p.source() + " has");
        return sink -> {
            var values = new float[CHUNK];
            var halves = new short[CHUNK];
            for (long i = 0; i < n; i += CHUNK) {
                int m = (int) Math.min(CHUNK, n - i);
                widen(src, i, m, values, halves);
                writeChunk(sink, p.type(), values, m);
            }
        };
    }

    /** A computed tensor, element by element from its sources (head reorderings, expert splits and stacks, norm +1, −exp). */
    private static GgufWriter.TensorData derived(Gemma4GgufPlan.Planned p, CheckpointFiles files) {
        var d = p.derived();
        var sources = d.sources().stream().map(s -> files.all().get(s)).toList();
        long n = p.elementCount(), per = n / sources.size();
        for (var s : sources) {
            if (!s.dtype().isFloat()) throw new GgufException(files.dir(), "tensor '" + s.name() + "' is " + s.dtype() + ", not a float tensor");
            if (s.elementCount() < per) throw new IllegalStateException(p.name() + " plans more elements than " + s.name() + " has");
        }
        return sink -> {
            var values = new float[CHUNK];
            for (long i = 0; i < n; i += CHUNK) {
                int m = (int) Math.min(CHUNK, n - i);
                for (int k = 0; k < m; k++) {
                    long o = i + k;
                    values[k] = d.op().apply(element(sources.get((int) (o / per)), d.index().applyAsLong(o % per)));
                }
                writeChunk(sink, p.type(), values, m);
            }
        };
    }

    private static float element(TensorView src, long i) {
        var seg = src.data();
        return switch (src.dtype()) {
            case F32 -> seg.getAtIndex(F32_LE, i);
            case BF16 -> BFloat16.widen(seg.getAtIndex(I16_LE, i));
            case F16 -> Float.float16ToFloat(seg.getAtIndex(I16_LE, i));
            default -> throw new IllegalStateException("tensor '" + src.name() + "' has non-float dtype " + src.dtype());
        };
    }

    private static final int CHUNK = 1 << 16;
    private static final ValueLayout.OfFloat F32_LE = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16_LE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Elements [from, from + m) of a checkpoint tensor as floats (bf16 and f16 widened exactly). */
    private static void widen(TensorView src, long from, int m, float[] out, short[] halves) {
        var seg = src.data();
        switch (src.dtype()) {
            case F32 -> MemorySegment.copy(seg, F32_LE, from * 4, out, 0, m);
            case BF16 -> {
                MemorySegment.copy(seg, I16_LE, from * 2, halves, 0, m);
                for (int k = 0; k < m; k++) out[k] = BFloat16.widen(halves[k]);
            }
            case F16 -> {
                MemorySegment.copy(seg, I16_LE, from * 2, halves, 0, m);
                for (int k = 0; k < m; k++) out[k] = Float.float16ToFloat(halves[k]);
            }
            default -> throw new IllegalStateException("tensor '" + src.name() + "' has non-float dtype " + src.dtype());
        }
    }

    private static void writeChunk(GgufWriter.DataSink sink, GgmlType type, float[] values, int m) throws IOException {
        if (type == GgmlType.Q8_0 || type == GgmlType.Q4_0) {
            // chunks are a multiple of 32 values and rows a whole number of blocks, so no block straddles two chunks
            sink.bytes(type == GgmlType.Q8_0 ? GgmlQuants.quantizeQ8_0(values, 0, m) : GgmlQuants.quantizeQ4_0(values, 0, m));
            return;
        }
        var buf = ByteBuffer.allocate(m * (type == GgmlType.F32 ? 4 : 2)).order(ByteOrder.LITTLE_ENDIAN);
        switch (type) {
            case F32 -> buf.asFloatBuffer().put(values, 0, m);
            case F16 -> { for (int k = 0; k < m; k++) buf.putShort(2 * k, Float.floatToFloat16(values[k])); }
            case BF16 -> { for (int k = 0; k < m; k++) buf.putShort(2 * k, BFloat16.round(values[k])); }
            default -> throw new IllegalArgumentException("cannot write " + type);
        }
        sink.bytes(buf.array());
    }
}
