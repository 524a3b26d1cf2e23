package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.metal.TensorView;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;

/**
 * Converts a Hugging Face Gemma 4 text checkpoint folder (config.json, *.safetensors, optionally the tokenizer)
 * into the GGUF llama.cpp's own conversion would write, in F32 (exact), BF16 or F16.
 */
public final class HfToGguf {
    private HfToGguf() {}

    /** The plan of a checkpoint folder: metadata and tensor infos, no data read. */
    public static Gemma4GgufPlan plan(Path dir, CheckpointFiles files, GgufOutputType type) {
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
        return Gemma4GgufPlan.of(name, config, configFile, headers, Gemma4Vocab.read(dir), type);
    }

    /** Writes the GGUF of a checkpoint folder; an existing {@code out} is replaced only when {@code force}. */
    public static Gemma4GgufPlan convert(Path dir, Path out, GgufOutputType type, boolean force) {
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
        if (p.values() != null) return sink -> { for (float v : p.values()) put(sink, p.type(), v); };
        TensorView src = files.all().get(p.source());
        long n = p.elementCount();
        if (!src.dtype().isFloat()) throw new GgufException(files.dir(), "tensor '" + p.source() + "' is " + src.dtype() + ", not a float tensor");
        if (n > src.elementCount()) throw new IllegalStateException(p.name() + " plans more elements than " + p.source() + " has");
        return sink -> { for (long i = 0; i < n; i++) put(sink, p.type(), src.getFloat(i)); };
    }

    private static void put(GgufWriter.DataSink sink, GgmlType type, float v) throws IOException {
        switch (type) {
            case F32 -> sink.f32(v);
            case F16 -> sink.u16(Float.floatToFloat16(v));
            case BF16 -> sink.u16(toBf16(v));
            default -> throw new IllegalArgumentException("cannot write " + type);
        }
    }

    /**
     * fp32 → bf16 as gguf-py rounds: to nearest, ties to even; a NaN stays a (quiet) NaN. Exact for values that
     * came from bf16.
     */
    static short toBf16(float v) {
        int n = Float.floatToRawIntBits(v);
        if ((n & 0x7fffffff) > 0x7f800000) return (short) (((n & 0xffff0000) | (64 << 16)) >>> 16);
        return (short) ((n + (0x7fff + ((n >>> 16) & 1))) >>> 16);
    }
}
