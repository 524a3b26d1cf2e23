package dev.decodiff.harness.cli;

import dev.decodiff.engine.EngineOptions;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.KvType;
import dev.decodiff.engine.arch.Architecture;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.arch.ArchitectureSupport;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.metal.MatmulPrecision;
import picocli.CommandLine.Option;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;

/** The engine switches every engine-running command shares (picocli mixin): catalog faults, KV cache types, matmul precision. */
public final class EngineFlags {
    @Option(names = "--fault", paramLabel = "ID", converter = Faults.Converter.class, completionCandidates = Faults.Candidates.class,
            description = "Switch on a catalog fault of the checkpoint's architecture (repeatable; live runs only; docs/faults.md): ${COMPLETION-CANDIDATES}.")
    List<String> faults = new ArrayList<>();

    @Option(names = "--kv-cache", paramLabel = "K[,V]",
            description = "How the KV cache stores keys and values: f32 (default, exact), bf16, q8_0, q4_0; one type for both, or K,V.")
    String kvCache;

    @Option(names = "--matmul", paramLabel = "P",
            description = "Precision of the products with bf16 weights: fp32 (default, exact; prefill on AMX tiles where the CPU has them, "
                    + "each activation split exactly into three bf16 terms), fp32-fma (the same on fused multiply-adds only: a prefill "
                    + "gives each token the bits of decoding it alone) or bf16 (activations rounded to bf16, AMX tiles or AVX512-BF16 dot "
                    + "products where the CPU has them, as llama.cpp; faster prefill, drift measured in docs/matmul-bf16.md).")
    String matmul;

    public boolean isDefault() { return faults.isEmpty() && kvCache == null && matmul == null; }

    /** Whether only --fault was given (what another architecture's engine accepts: it runs exact fp32 only). */
    public boolean onlyFaults() { return kvCache == null && matmul == null; }

    /**
     * The --fault ids, each checked against the catalog of the architecture that runs {@code model}: a fault of
     * another architecture is refused with one line naming its owner and this one's catalog.
     */
    public List<String> faultIds(Architecture arch, Object model) { return faultIds(arch, model + " is " + arch.name()); }

    private List<String> faultIds(Architecture arch, String runs) {
        for (String id : faults) {
            if (arch.faultNames().contains(id)) continue;
            String owner = Faults.owner(id);
            throw new BadInputException("--fault " + id + " is " + (owner == null ? "not in any catalog" : "a " + owner + " fault") + ", and "
                    + runs + (arch.faultNames().isEmpty() ? ", which has no fault catalog; drop --fault"
                    : "; its catalog has: " + String.join(", ", arch.faultNames())));
        }
        return List.copyOf(faults);
    }

    /**
     * The tunable engine's options (Gemma 4's): its faults (a fault of another architecture is refused), KV cache types,
     * matmul precision.
     */
    public EngineOptions options() {
        var arch = ArchitectureSupports.offering(ArchitectureSupport::tunableEngine).getFirst().architecture();
        var set = EnumSet.noneOf(Fault.class);
        for (String id : faultIds(arch, "this runs " + arch.name() + "'s engine (other architectures' faults apply to compare, dump and selfcheck)"))
            set.add(Fault.byId(id));
        var options = EngineOptions.defaults().withFaults(set);
        if (matmul != null) {
            try {
                options = options.withMatmul(MatmulPrecision.byId(matmul.strip()));
            } catch (IllegalArgumentException e) {
                throw new BadInputException("--matmul: " + e.getMessage());
            }
        }
        if (kvCache == null) return options;
        var parts = kvCache.split(",", -1);
        if (parts.length > 2) throw new BadInputException("--kv-cache takes one type or K,V, got '" + kvCache + "'");
        try {
            var k = KvType.byId(parts[0].strip());
            var v = parts.length == 2 ? KvType.byId(parts[1].strip()) : k;
            return options.withKvTypes(k, v);
        } catch (IllegalArgumentException e) {
            throw new BadInputException("--kv-cache: " + e.getMessage());
        }
    }
}
