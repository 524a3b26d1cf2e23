package dev.decodiff.engine;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.quant.MlxQuantization;
import dev.decodiff.engine.quant.QuantizationSummary;
import dev.decodiff.engine.quant.QuantizedTensors;
import dev.decodiff.metal.HugePageMemory;
import dev.decodiff.metal.SafetensorsException;
import dev.decodiff.metal.SafetensorsFile;
import dev.decodiff.metal.TensorView;
import dev.decodiff.metal.WeightMatrix;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * The safetensors shards of a Hugging Face checkpoint folder, memory-mapped, with the text model's weight
 * prefix resolved ("model." from Gemma4ForCausalLM, "model.language_model." from the multimodal class,
 * "language_model.model." from mlx-vlm / mlx-lm conversions). An MLX-quantized checkpoint (config.json's
 * "quantization") has its 4- and 8-bit matrices kept as codes ({@link #matrix} gives them packed, see
 * {@link QuantizedTensors}) and its other quantized weights dequantized to fp32 here, once: {@link #matrix} and
 * {@link #get} are what the engine reads, {@link #stored()} what the files hold, {@link #all()} every tensor as fp32.
 */
public final class CheckpointFiles implements AutoCloseable {
    private final Path dir;
    private final List<SafetensorsFile> shards;
    private final Map<String, TensorView> stored;
    private final String prefix;
    private final MlxQuantization declared;
    private Map<String, TensorView> byName;
    private Map<String, QuantizedTensors.PackedTensor> packed = Map.of();
    /** Packed tensors dequantized on request (a tool reading them as fp32 through {@link #get} or {@link #all()}). */
    private final Map<String, TensorView> expanded = new LinkedHashMap<>();
    private QuantizationSummary quantization;
    private Arena dequantized;
    /** Packed matrices with their codes blocked, by tensor name (made on first use). */
    private final Map<String, WeightMatrix> matrices = new LinkedHashMap<>();
    private final Map<String, Long> slabOffsets = new LinkedHashMap<>();
    private MemorySegment slab;

    private CheckpointFiles(Path dir, List<SafetensorsFile> shards, Map<String, TensorView> stored, String prefix, MlxQuantization declared) {
        this.dir = dir;
        this.shards = shards;
        this.stored = stored;
        this.prefix = prefix;
        this.declared = declared;
        if (declared == null) byName = stored;
    }

    public static CheckpointFiles open(Path dir) {
        var files = shardFiles(dir);
        var shards = new ArrayList<SafetensorsFile>();
        var byName = new LinkedHashMap<String, TensorView>();
        try {
            for (Path f : files) {
                var sf = SafetensorsFile.open(f);
                shards.add(sf);
                for (var e : sf.tensors().entrySet()) {
                    if (byName.putIfAbsent(e.getKey(), e.getValue()) != null)
                        throw new CheckpointException(f + ": tensor '" + e.getKey() + "' also appears in another shard");
                }
            }
        } catch (SafetensorsException e) {
            shards.forEach(SafetensorsFile::close);
            throw new CheckpointException(e.getMessage() + " — re-download or re-save the checkpoint", e);
        } catch (RuntimeException e) {
            shards.forEach(SafetensorsFile::close);
            throw e;
        }
        String prefix;
        if (byName.containsKey("model.language_model.embed_tokens.weight")) prefix = "model.language_model.";
        else if (byName.containsKey("language_model.model.embed_tokens.weight")) prefix = "language_model.model.";
        else if (byName.containsKey("model.embed_tokens.weight")) prefix = "model.";
        else if (byName.containsKey("embed_tokens.weight")) prefix = "";
        else {
            shards.forEach(SafetensorsFile::close);
            throw new CheckpointException(dir + ": no embed_tokens.weight under the prefixes 'model.', 'model.language_model.' or 'language_model.model.' — is this a Gemma 4 checkpoint?");
        }
        try {
            var q = quantizationOf(dir);
            if (q == null) QuantizedTensors.requireNone(dir, byName);
            return new CheckpointFiles(dir, shards, byName, prefix, q);
        } catch (RuntimeException e) {
            shards.forEach(SafetensorsFile::close);
            throw e;
        }
    }

    /**
     * The tensors as the engine reads them, dequantizing on first use: hashing or listing a quantized checkpoint
     * (finding which one a reference was made from) does not pay for its fp32 copy.
     */
    private synchronized Map<String, TensorView> resolved() {
        if (byName == null) {
            var arena = Arena.ofShared();
            try {
                var r = QuantizedTensors.resolve(dir, stored, declared, arena);
                quantization = r.summary();
                dequantized = arena;
                packed = r.packed();
                byName = r.tensors();
            } catch (RuntimeException | Error e) {
                arena.close();
                throw e;
            }
        }
        return byName;
    }

    private static MlxQuantization quantizationOf(Path dir) {
        Path cfg = dir.resolve("config.json");
        if (!Files.isRegularFile(cfg)) return null;
        try {
            return MlxQuantization.of(new ObjectMapper().readTree(cfg.toFile()), cfg.toString());
        } catch (IOException e) {
            throw new CheckpointException(cfg + ": cannot read config.json: " + e.getMessage(), e);
        }
    }

    private static List<Path> shardFiles(Path dir) {
        if (!Files.isDirectory(dir)) throw new CheckpointException(dir + ": not a checkpoint folder (expected config.json and *.safetensors)");
        Path index = dir.resolve("model.safetensors.index.json");
        var names = new TreeSet<String>();
        if (Files.isRegularFile(index)) {
            try {
                var map = new ObjectMapper().readTree(index.toFile()).path("weight_map");
                if (!map.isObject()) throw new CheckpointException(index + ": has no weight_map object");
                map.elements().forEachRemaining(n -> names.add(n.asText()));
            } catch (IOException e) {
                throw new CheckpointException(index + ": cannot read: " + dev.decodiff.metal.JsonErrors.plain(e), e);
            }
            var out = new ArrayList<Path>();
            for (String n : names) {
                Path p = dir.resolve(n);
                if (!Files.isRegularFile(p)) throw new CheckpointException(index + ": names shard '" + n + "', which is missing from " + dir);
                out.add(p);
            }
            return out;
        }
        try (var s = Files.list(dir)) {
            var out = s.filter(p -> p.getFileName().toString().endsWith(".safetensors")).sorted().toList();
            if (out.isEmpty()) throw new CheckpointException(dir + ": no *.safetensors files");
            return out;
        } catch (IOException e) {
            throw new CheckpointException(dir + ": cannot list: " + e.getMessage(), e);
        }
    }

    public Path dir() { return dir; }

    public String prefix() { return prefix; }

    /**
     * Every tensor as fp32 or its stored float type (quantized weights dequantized; their scales and biases gone):
     * for tools that read tensors (GGUF export). Matrices kept packed are dequantized for it, once; the engine reads
     * them with {@link #matrix} instead.
     */
    public synchronized Map<String, TensorView> all() {
        var all = resolved();
        if (packed.isEmpty()) return all;
        var out = new LinkedHashMap<String, TensorView>();
        for (var t : stored.values()) {
            var v = all.get(t.name());
            if (v != null) out.put(t.name(), v);
            else if (packed.containsKey(t.name())) out.put(t.name(), expand(t.name()));
        }
        return out;
    }

    private synchronized TensorView expand(String name) {
        return expanded.computeIfAbsent(name, n -> packed.get(n).dequantized(dequantized));
    }

    /**
     * A text-model matrix by its name below the prefix, [rows, cols] (its tensor's leading dimensions folded into
     * rows), the tensor checked against {@code shape}: MLX affine codes kept packed, or the float tensor's view.
     */
    public WeightMatrix matrix(String name, int rows, int cols, long... shape) {
        var p = packedTensor(name, rows, cols, shape);
        return p == null ? WeightMatrix.of(get(name, shape), rows, cols) : blocked(p);
    }

    /** The packed tensor by its name below the prefix (null for a float one), checked against {@code shape} and [rows, cols]. */
    private QuantizedTensors.PackedTensor packedTensor(String name, int rows, int cols, long... shape) {
        resolved();
        var p = packed.get(prefix + name);
        if (p == null) p = packed.get(name);
        if (p == null) return null;
        if (!java.util.Arrays.equals(p.shape(), shape))
            throw new CheckpointException(dir + ": tensor '" + p.name() + "' has shape " + java.util.Arrays.toString(p.shape()) + ", config.json implies "
                    + java.util.Arrays.toString(shape));
        if (p.rows() != rows || p.cols() != cols)
            throw new IllegalArgumentException("tensor '" + p.name() + "' " + java.util.Arrays.toString(p.shape()) + " is not [" + rows + ", " + cols + "]");
        return p;
    }

    /**
     * A packed matrix with its codes blocked (once), as the kernels read them: every packed matrix has its place in one
     * slab, on huge pages where the machine has them (a mapping per matrix would waste part of a 2 MB page on each).
     */
    private synchronized WeightMatrix blocked(QuantizedTensors.PackedTensor p) {
        if (slab == null) {
            long total = 0;
            for (var t : packed.values()) {
                slabOffsets.put(t.name(), total);
                total += (t.codeBytes() + 63) / 64 * 64;
            }
            total = Math.max(total, 64);
            slab = HugePageMemory.available() ? HugePageMemory.allocate(total, dequantized) : dequantized.allocate(total, 64);
        }
        return matrices.computeIfAbsent(p.name(), n -> {
            var m = p.matrix(slab.asSlice(slabOffsets.get(n), p.codeBytes()));
            // reading the stored codes faulted the file's pages into this process; drop them (they stay in the page
            // cache) so the weights are not counted twice in its resident set
            if (p.codes().data().isMapped()) p.codes().data().unload();
            return m;
        });
    }

    /**
     * {@link #matrix} of a 2-D table looked up a row at a time and never streamed through a kernel (E2B's per-layer
     * embeddings): MLX affine codes stay where the checkpoint stores them (mapped, only the rows read come in), not
     * blocked into memory of their own.
     */
    public WeightMatrix lookupTable(String name, long rows, long cols) {
        int r = Math.toIntExact(rows), c = Math.toIntExact(cols);
        var p = packedTensor(name, r, c, rows, cols);
        return p == null ? WeightMatrix.of(get(name, rows, cols), r, c) : WeightMatrix.affineAsStored(p.name(), r, c, p.codes().data(), p.groups());
    }

    /** {@link #matrix} of a 2-D tensor [rows, cols]. */
    public WeightMatrix matrix(String name, long rows, long cols) {
        return matrix(name, Math.toIntExact(rows), Math.toIntExact(cols), rows, cols);
    }

    /** Bytes the matrices kept packed hold: their codes, scales and biases. */
    public long packedBytes() {
        resolved();
        return packed.values().stream().mapToLong(QuantizedTensors.PackedTensor::bytes).sum();
    }

    /** Names of the matrices kept packed (MLX affine codes), as the files name them. */
    public java.util.Set<String> packedNames() {
        resolved();
        return packed.keySet();
    }

    /** Every tensor as the files store it. */
    public Map<String, TensorView> stored() { return stored; }

    /** How the checkpoint's tensors were dequantized (MLX affine), or null for a float checkpoint. */
    public QuantizationSummary quantization() {
        if (declared == null) return null;
        resolved();
        return quantization;
    }

    /** The quantization config.json declares (no tensor read), or null for a float checkpoint. */
    public MlxQuantization declaredQuantization() { return declared; }

    /**
     * The untied output head's tensor name, or null when the checkpoint has none: "lm_head.weight" at the root
     * (Gemma4ForCausalLM) or beside the text model ("language_model.lm_head.weight", mlx-vlm).
     */
    public String headName() {
        for (String n : List.of("lm_head.weight", "language_model.lm_head.weight", "model.language_model.lm_head.weight"))
            if (stored.containsKey(n)) return n;
        return null;
    }

    public List<Path> shardPaths() { return shards.stream().map(SafetensorsFile::path).toList(); }

    public long totalBytes() { return stored.values().stream().mapToLong(t -> t.data().byteSize()).sum(); }

    /** A text-model tensor by its name below the prefix, e.g. "layers.0.self_attn.q_proj.weight". */
    public TensorView get(String name, long... shape) {
        var all = resolved();
        var t = all.get(prefix + name);
        if (t == null) t = all.get(name);
        if (t == null && packed.containsKey(prefix + name)) t = expand(prefix + name);
        if (t == null && packed.containsKey(name)) t = expand(name);
        if (t == null) throw new CheckpointException(dir + ": missing tensor '" + prefix + name + "' — the checkpoint does not match its config.json");
        if (shape.length > 0 && !java.util.Arrays.equals(t.shape(), shape))
            throw new CheckpointException(dir + ": tensor '" + t.name() + "' has shape " + t.shapeString() + ", config.json implies "
                    + java.util.Arrays.toString(shape));
        return t;
    }

    public boolean has(String name) { return stored.containsKey(prefix + name) || stored.containsKey(name); }

    /** sha256 of the *.safetensors files' bytes concatenated in file-name order (docs/dump-format.md). */
    public String weightsSha256() {
        var files = new ArrayList<>(shardPaths());
        files.sort(java.util.Comparator.comparing(p -> p.getFileName().toString()));
        var md = sha256();
        byte[] buf = new byte[1 << 20];
        for (Path f : files) {
            try (InputStream in = Files.newInputStream(f)) {
                int n;
                while ((n = in.read(buf)) > 0) md.update(buf, 0, n);
            } catch (IOException e) {
                throw new CheckpointException(f + ": cannot read: " + e.getMessage(), e);
            }
        }
        return HexFormat.of().formatHex(md.digest());
    }

    public static String sha256(Path file) {
        try {
            return HexFormat.of().formatHex(sha256().digest(Files.readAllBytes(file)));
        } catch (IOException e) {
            throw new CheckpointException(file + ": cannot read: " + e.getMessage(), e);
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public synchronized void close() {
        try {
            if (dequantized != null) dequantized.close();
        } finally {
            shards.forEach(SafetensorsFile::close);
        }
    }
}
