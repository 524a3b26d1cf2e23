package dev.decodiff.harness.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.Home;
import dev.decodiff.harness.arch.ArchitectureSupports;
import dev.decodiff.harness.arch.PlanGeometryReader;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.live.ModelLocator;
import dev.decodiff.harness.plan.CapturePlan;
import dev.decodiff.harness.plan.PlanGeometry;
import dev.decodiff.harness.plan.PlanJson;
import dev.decodiff.harness.plan.PlanText;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "plan", mixinStandardHelpOptions = true,
        description = {"Prints the capture plan a producer follows to write a dump decodiff can compare: every capture point in causal"
                + " order, its shape at a prefill step and at a decode step, which positions the read-back points (attn.k_read,"
                + " attn.v_read) hold on sliding and KV-shared layers, which points local attribution needs, and the dtype.",
                "For a reference dump (the points, steps and tokens your dump must have to be compared with it), or for a"
                + " checkpoint with --model, --prompt-length and --decode-steps. `validate` and `compare` check shapes by the"
                + " same plan. --json is what python/decodiff_dump.py checks each tensor against as it writes it."},
        footer = {"", "Exit codes: 0 printed, 2 bad input or usage.",
                "Examples:",
                "  decodiff plan                                   # the bundled default reference",
                "  decodiff plan reference-dumps/gemma4-tiny/long --json > plan.json",
                "  decodiff plan --model checkpoints/gemma4-tiny-ple --prompt-length 7 --decode-steps 8"})
final class PlanCommand implements Callable<Integer> {
    @Parameters(paramLabel = "REFERENCE", arity = "0..1",
            description = "A reference dump: the plan is its points, steps and tokens (default: the bundled "
                    + Home.DEFAULT_CASE + ", unless --model is given).")
    Path reference;

    @Option(names = "--model", paramLabel = "DIR", description = {"A checkpoint folder (config.json). Without REFERENCE: the plan of this"
            + " checkpoint for --prompt-length and --decode-steps. With REFERENCE: the checkpoint it was made from (default: the"
            + " bundled one whose hashes match, if any), which says what each read holds."})
    Path model;

    @Option(names = "--prompt-length", paramLabel = "N", description = "With --model alone: the prompt's tokens (step 0 prefills them).")
    Integer promptLength;

    @Option(names = "--decode-steps", paramLabel = "M", description = "With --model alone: the decode steps after the prefill, one token each.")
    Integer decodeSteps;

    @Mixin
    JsonOption json;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        var plan = reference == null && model != null ? forCheckpoint() : forReference();
        var out = spec.commandLine().getOut();
        if (json.on()) {
            out.println(dev.decodiff.harness.Printable.json(new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT)).writeValueAsString(PlanJson.of(plan)));
        } else {
            out = PrintableLines.around(out);
            PlanText.print(plan, out);
        }
        out.flush();
        return Main.MATCH;
    }

    private CapturePlan forCheckpoint() {
        if (promptLength == null || decodeSteps == null)
            throw new BadInputException("plan --model " + model + " needs --prompt-length N and --decode-steps M (the steps your dump will"
                    + " have), or a REFERENCE dump instead");
        if (promptLength < 1) throw new BadInputException("--prompt-length " + promptLength + ": a prompt has at least one token");
        if (decodeSteps < 0) throw new BadInputException("--decode-steps " + decodeSteps + ": it is 0 or more");
        String type = modelType(model);
        var reader = ArchitectureSupports.planGeometry(type).orElseThrow(() ->
                new BadInputException(model.resolve("config.json"), "is a " + type + " checkpoint; plan --model computes shapes for Gemma 4"
                    + " checkpoints only so far — give a reference dump of it instead (decodiff plan REFERENCE), whose tensors fix every shape"));
        var cfg = geometry(reader, model);
        var id = ModelLocator.identity(model);
        var m = new DumpManifest.Model(cfg.modelType(), cfg.numLayers(), id.configSha256(), id.weightsSha256());
        return CapturePlan.forCheckpoint("checkpoint " + model, cfg, m, promptLength, decodeSteps, 0);
    }

    private CapturePlan forReference() {
        if (promptLength != null || decodeSteps != null)
            throw new BadInputException("--prompt-length and --decode-steps go with --model alone: a reference dump fixes its own steps");
        Path dir = reference == null ? Home.defaultReference() : reference;
        var ref = DumpReader.open(dir);
        PlanGeometry cfg = null;
        // a family without a plan reader: the reference's own tensors give every shape
        var reader = ArchitectureSupports.planGeometry(ref.manifest().model().modelType());
        if (model != null) {
            ModelLocator.check(model, ModelLocator.identity(model), ref.manifest(), ref.manifestFile(), false);
            if (reader.isPresent()) cfg = geometry(reader.get(), model);
        } else {
            try {
                Path bundled = ModelLocator.bundledFor(Home.get(), ref.manifest(), ref.manifestFile());
                if (reader.isPresent()) cfg = geometry(reader.get(), bundled);
            } catch (BadInputException notBundled) {
                // a reference of a checkpoint that is not here: its own tensors still give every shape and window
            }
        }
        return CapturePlan.forReference(ref, cfg);
    }

    private static String modelType(Path dir) {
        try {
            var root = new ObjectMapper().readTree(dir.resolve("config.json").toFile());
            return root.path("model_type").asText(null);
        } catch (java.io.IOException e) {
            return null; // config() says what is wrong with it
        }
    }

    private static PlanGeometry geometry(PlanGeometryReader reader, Path dir) {
        Path cfg = dir.resolve("config.json");
        if (!Files.isRegularFile(cfg)) throw new BadInputException(dir, "has no config.json; --model takes a Hugging Face checkpoint folder");
        return reader.read(cfg);
    }
}
