package dev.decodiff.engine.qwen35;

import dev.decodiff.engine.CheckpointException;
import dev.decodiff.engine.CheckpointFiles;
import dev.decodiff.engine.Probe;

import java.nio.file.Path;

/** A loaded Qwen3.5 text model (dense or MoE): config, weights and the RoPE table, shared by its sessions. */
public final class Qwen35Model implements AutoCloseable {
    private final Path dir;
    private final Qwen35Config config;
    private final CheckpointFiles files;
    private final Qwen35Weights weights;
    private final float[] invFreq;
    private final Qwen35Ops ops;

    private Qwen35Model(Path dir, Qwen35Config config, CheckpointFiles files, Qwen35Weights weights) {
        this.dir = dir;
        this.config = config;
        this.files = files;
        this.weights = weights;
        this.invFreq = dev.decodiff.engine.Rope.inverseFrequencies(dev.decodiff.engine.RopeSpec.defaultRope(config.ropeTheta()), config.rotaryDim());
        this.ops = new Qwen35Ops(this);
    }

    /** The model's ops (the forward's and attribution's one description of its math). */
    public Qwen35Ops ops() { return ops; }

    public static Qwen35Model load(Path dir) {
        var config = Qwen35Config.read(dir.resolve("config.json"));
        var files = CheckpointFiles.open(dir);
        try {
            if (files.declaredQuantization() != null)
                throw new CheckpointException(dir + ": config.json declares quantization; the Qwen3.5 engine runs float (bf16/fp16/fp32) checkpoints only");
            return new Qwen35Model(dir, config, files, Qwen35Weights.load(files, config));
        } catch (RuntimeException e) {
            files.close();
            throw e;
        }
    }

    public Path directory() { return dir; }

    public Qwen35Config config() { return config; }

    public Qwen35Weights weights() { return weights; }

    public CheckpointFiles files() { return files; }

    /** inv_freq[i] = 1/θ^(2i/R) over the R rotary dims, in fp32 as transformers forms it. */
    float[] invFreq() { return invFreq; }

    public String configSha256() { return CheckpointFiles.sha256(dir.resolve("config.json")); }

    public String weightsSha256() { return files.weightsSha256(); }

    public Qwen35Session newSession(Probe probe) { return new Qwen35Session(this, probe, java.util.Set.of()); }

    /** A session with catalog faults switched on. */
    public Qwen35Session newSession(Probe probe, java.util.Set<Qwen35Fault> faults) { return new Qwen35Session(this, probe, faults); }

    @Override
    public void close() { files.close(); }
}
