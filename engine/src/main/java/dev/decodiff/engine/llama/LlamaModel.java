package dev.decodiff.engine.llama;

import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.engine.Probe;
import dev.decodiff.engine.Rope;
import dev.decodiff.engine.RopeSpec;

import java.nio.file.Path;

/** A loaded Llama-family model: config, weights and the RoPE table (llama3-scaled where configured), shared by its sessions. */
public final class LlamaModel implements AutoCloseable {
    private final Path dir;
    private final LlamaConfig config;
    private final CheckpointFiles files;
    private final LlamaWeights weights;
    private final Rope rope;
    private final LlamaOps ops;

    private LlamaModel(Path dir, LlamaConfig config, CheckpointFiles files, LlamaWeights weights) {
        this.dir = dir;
        this.config = config;
        this.files = files;
        this.weights = weights;
        float[] inv = Rope.inverseFrequencies(RopeSpec.defaultRope(config.ropeTheta()), config.headDim());
        if (config.ropeScaling() != null) inv = config.ropeScaling().apply(inv);
        this.rope = Rope.ofInverseFrequencies(inv, config.headDim());
        this.ops = new LlamaOps(this);
    }

    public static LlamaModel load(Path dir) {
        var config = LlamaConfig.read(dir.resolve("config.json"));
        var files = CheckpointFiles.open(dir);
        try {
            if (files.declaredQuantization() != null)
                throw new CheckpointException(dir + ": config.json declares quantization; the Llama-family engine runs float (bf16/fp16/fp32) checkpoints only");
            return new LlamaModel(dir, config, files, LlamaWeights.load(files, config));
        } catch (RuntimeException e) {
            files.close();
            throw e;
        }
    }

    public Path directory() { return dir; }

    public LlamaConfig config() { return config; }

    public LlamaWeights weights() { return weights; }

    /** The rotation every layer applies to its queries and keys. */
    public Rope rope() { return rope; }

    /** The one description of the model's ops: the session's forward and attribution both run these. */
    public LlamaOps ops() { return ops; }

    public String configSha256() { return CheckpointFiles.sha256(dir.resolve("config.json")); }

    public String weightsSha256() { return files.weightsSha256(); }

    public LlamaSession newSession(Probe probe) { return new LlamaSession(this, probe, java.util.Set.of()); }

    /** A session with catalog faults switched on. */
    public LlamaSession newSession(Probe probe, java.util.Set<LlamaFault> faults) { return new LlamaSession(this, probe, faults); }

    @Override
    public void close() { files.close(); }
}
