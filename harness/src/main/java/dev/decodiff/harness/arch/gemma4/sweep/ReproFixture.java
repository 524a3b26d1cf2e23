package dev.decodiff.harness.arch.gemma4.sweep;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.BadInputException;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A minimized failure as a folder a maintainer can run without decodiff: scenario.json (the schedules), README.md (what
 * fails, where, the weights' hash), cell.json (the failing cell's sequence tokens, expected and got rows), and for
 * llama.cpp repro.c, a short C program against llama.h that replays both schedules and prints where their logits
 * part, with build.sh to compile it against a llama.cpp build.
 */
public final class ReproFixture {
    private ReproFixture() {}

    public static void write(Path dir, ScenarioEngine engine, Scenario sc, Outcome.Fail fail, Path model) {
        try {
            Files.createDirectories(dir);
            ScenarioJson.save(sc, dir.resolve("scenario.json"));
            var m = new ObjectMapper();
            var cell = m.createObjectNode();
            cell.put("schedule", String.valueOf((char) ('A' + fail.schedule())));
            cell.put("step", fail.step()).put("sequence", fail.seq()).put("position", fail.position()).put("point", fail.point());
            cell.put("kind", fail.kind()).put("detail", fail.detail());
            if (engine instanceof LlamaCppScenarios l) cell.put("model_file", l.gguf().toAbsolutePath().toString());
            cell.put("rel_l2", Double.isFinite(fail.relL2()) ? fail.relL2() : -1).put("tolerance", fail.tolerance());
            var toks = cell.putArray("tokens");
            int[] stream = sc.stream(fail.seq());
            for (int i = 0; i <= Math.min(fail.position(), stream.length - 1); i++) toks.add(stream[i]);
            if (fail.reference() != null) {
                var e = cell.putArray("expected");
                for (float f : fail.reference()) e.add(f);
                var g = cell.putArray("got");
                for (float f : fail.candidate()) g.add(f);
            }
            Files.writeString(dir.resolve("cell.json"), m.writerWithDefaultPrettyPrinter().writeValueAsString(cell) + "\n");
            boolean llama = engine instanceof LlamaCppScenarios;
            if (llama) {
                Files.writeString(dir.resolve("repro.c"), cProgram(sc, engine.tolerance(sc.settings())));
                Files.writeString(dir.resolve("build.sh"), BUILD);
                dir.resolve("build.sh").toFile().setExecutable(true);
            }
            Files.writeString(dir.resolve("README.md"), readme(engine, sc, fail, model, llama));
        } catch (IOException e) {
            throw new BadInputException(dir, "cannot write the repro (" + e.getMessage() + "); pass --repro a folder you can write");
        }
    }

    private static String readme(ScenarioEngine engine, Scenario sc, Outcome.Fail f, Path model, boolean llama) {
        var s = new StringBuilder("# " + sc.family() + ": " + f.kind() + "\n\n");
        s.append("Engine: ").append(engine.describe()).append("  \nWeights: ").append(engine.weightsIdentity()).append("  \nSettings: ")
                .append(sc.settings().describe()).append("\n\nTwo schedules over the same tokens (scenario.json) must give the same logits at every (sequence, position):\n\n```\n")
                .append(sc.describeSchedules()).append("\n```\n\nFirst disagreement, in causal order: ").append(f.cell()).append(" of schedule ")
                .append((char) ('A' + f.schedule())).append(".\n\n").append(f.detail()).append("\n\ncell.json has that sequence's tokens up to the position, and the expected (schedule A) and got rows.\n\n");
        if (llama) s.append("Run without decodiff:\n\n```sh\n./build.sh            # LLAMA=<llama.cpp build folder with lib/ and src/include>, default ~/.cache/decodiff/llama.cpp-3.22.1-native\n./repro MODEL.gguf    # prints the first position whose logits differ; exit 1 when they do\n```\n\n");
        s.append("With decodiff: `decodiff sweep --model ").append(model).append(" --scenario scenario.json")
                .append(llama ? " --engine llama.cpp" : "").append("`\n");
        return s.toString();
    }

    private static final String BUILD = """
            #!/bin/sh
            # Builds repro.c against a llama.cpp build (its lib/ and the source's include folders).
            set -e
            LLAMA=${LLAMA:-$HOME/.cache/decodiff/llama.cpp-3.22.1-native}
            cd "$(dirname "$0")"
            ${CC:-gcc} -O1 -o repro repro.c -I"$LLAMA/src/include" -I"$LLAMA/src/ggml/include" -L"$LLAMA/lib" -Wl,-rpath,"$LLAMA/lib" -lllama -lggml -lggml-base -lm
            echo "built $(pwd)/repro"
            """;

    static int ggmlType(String t) {
        return switch (t.toLowerCase(Locale.ROOT)) {
            case "f32" -> 0;
            case "f16" -> 1;
            case "q4_0" -> 2;
            case "q8_0" -> 8;
            case "bf16" -> 30;
            default -> throw new IllegalArgumentException("unknown KV type " + t);
        };
    }

    /** Ops as rows {kind, seq, arg, arg2, joins-next}: the C program's schedule table. */
    private static List<int[]> table(List<Op> ops) {
        var out = new ArrayList<int[]>();
        for (var op : ops) {
            switch (op) {
                case Op.Feed f -> out.add(new int[]{0, f.seq(), f.n(), 0, 0});
                case Op.Batch b -> {
                    for (int i = 0; i < b.feeds().size(); i++)
                        out.add(new int[]{0, b.feeds().get(i).seq(), b.feeds().get(i).n(), 0, i + 1 < b.feeds().size() ? 1 : 0});
                }
                case Op.Truncate t -> out.add(new int[]{1, t.seq(), t.length(), 0, 0});
                case Op.Copy c -> out.add(new int[]{2, c.from(), c.length(), c.to(), 0});
                case Op.Offset o -> out.add(new int[]{5, o.seq(), o.n(), 0, 0});
                case Op.Shift s -> out.add(new int[]{6, s.seq(), s.delta(), 0, 0});
                case Op.Snapshot sn -> out.add(new int[]{3, sn.seq(), 0, 0, 0});
                case Op.Restore r -> out.add(new int[]{4, r.seq(), 0, 0, 0});
            }
        }
        return out;
    }

    private static String ints(int[] a) {
        var s = new StringBuilder();
        for (int i = 0; i < a.length; i++) s.append(i == 0 ? "" : ",").append(a[i]);
        return s.toString();
    }

    static String cProgram(Scenario sc, double tolerance) {
        if (sc.schedules().size() != 2) throw new IllegalArgumentException("the C repro replays two schedules");
        var st = sc.settings();
        int nseq = sc.streams().keySet().stream().mapToInt(Integer::intValue).max().orElse(0) + 1;
        int maxLen = sc.streams().values().stream().mapToInt(a -> a.length).max().orElse(1);
        var c = new StringBuilder();
        c.append("// Replays two schedules of one scenario (scenario.json) on llama.cpp and prints where their logits part.\n");
        c.append("// Family ").append(sc.family()).append(", settings: ").append(st.describe()).append(". Generated by decodiff sweep.\n");
        c.append("#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include \"llama.h\"\n\n");
        c.append("enum { FEED, TRUNC, COPY, SNAP, REST, OFFSET, SHIFT };\n");
        c.append("#define NSEQ ").append(nseq).append("\n#define MAXLEN ").append(maxLen).append("\n");
        for (int s = 0; s < nseq; s++) {
            int[] t = sc.streams().getOrDefault(s, new int[]{0});
            c.append("static const int S").append(s).append("[] = {").append(ints(t)).append("};\n");
        }
        c.append("static const int *STREAM[NSEQ] = {");
        for (int s = 0; s < nseq; s++) c.append(s == 0 ? "" : ", ").append("S").append(s);
        c.append("};\n");
        for (int k = 0; k < 2; k++) {
            var t = table(sc.schedules().get(k));
            c.append("static const int OPS").append(k).append("[][5] = {");
            for (int i = 0; i < t.size(); i++) c.append(i == 0 ? "" : ", ").append("{").append(ints(t.get(i))).append("}");
            c.append("};\nstatic const int N").append(k).append(" = ").append(t.size()).append(";\n");
        }
        c.append("static float *LOGITS[2][NSEQ][MAXLEN];\n\n");
        c.append(String.format(Locale.ROOT, """
                static void run(struct llama_model *model, int which, const int (*ops)[5], int nops) {
                    struct llama_context_params cp = llama_context_default_params();
                    cp.n_ctx = %d; cp.n_batch = %d; cp.n_ubatch = %d; cp.n_seq_max = 4; cp.n_threads = cp.n_threads_batch = 1;
                    cp.swa_full = %s; cp.kv_unified = true; cp.type_k = %d; cp.type_v = %d; cp.flash_attn_type = %d;
                    struct llama_context *ctx = llama_init_from_model(model, cp);
                    llama_memory_t mem = llama_get_memory(ctx);
                    int nv = llama_vocab_n_tokens(llama_model_get_vocab(model)), len[NSEQ] = {0}, off[NSEQ] = {0}, snaplen = 0;
                    uint8_t *snap = NULL; size_t snapn = 0;
                    struct llama_batch b = llama_batch_init(512, 0, 1);
                    for (int i = 0; i < nops; i++) {
                        const int *o = ops[i];
                        if (o[0] == FEED) {
                            for (int j = 0; j < o[2]; j++) { int k = b.n_tokens++; b.token[k] = STREAM[o[1]][len[o[1]] + j];
                                b.pos[k] = off[o[1]] + len[o[1]] + j; b.n_seq_id[k] = 1; b.seq_id[k][0] = o[1]; b.logits[k] = 1; }
                            len[o[1]] += o[2];
                            if (o[4]) continue; /* the next feed joins this batch */
                            if (llama_decode(ctx, b)) { printf("schedule %%c: llama_decode refused op %%d\\n", 'A' + which); exit(2); }
                            for (int k = 0; k < b.n_tokens; k++) { float *l = malloc(sizeof(float) * nv);
                                for (int v = 0; v < nv; v++) l[v] = llama_get_logits_ith(ctx, k)[v];
                                LOGITS[which][b.seq_id[k][0]][b.pos[k] - off[b.seq_id[k][0]]] = l; }
                            b.n_tokens = 0;
                        } else if (o[0] == OFFSET) { off[o[1]] += o[2];
                        } else if (o[0] == SHIFT) { if (!llama_memory_can_shift(mem)) { printf("schedule %%c: llama_memory_can_shift is false\\n", 'A' + which); exit(3); }
                            llama_memory_seq_add(mem, o[1], -1, -1, o[2]); off[o[1]] += o[2];
                        } else if (o[0] == TRUNC) { llama_memory_seq_rm(mem, o[1], off[o[1]] + o[2], -1); len[o[1]] = o[2];
                        } else if (o[0] == COPY) { llama_memory_seq_rm(mem, o[3], -1, -1); llama_memory_seq_cp(mem, o[1], o[3], -1, -1);
                            llama_memory_seq_rm(mem, o[3], o[2], -1); len[o[3]] = o[2];
                        } else if (o[0] == SNAP) { snapn = llama_state_seq_get_size(ctx, o[1]); snap = malloc(snapn);
                            llama_state_seq_get_data(ctx, snap, snapn, o[1]); snaplen = len[o[1]];
                        } else { llama_memory_seq_rm(mem, o[1], -1, -1); llama_state_seq_set_data(ctx, snap, snapn, o[1]); len[o[1]] = snaplen; }
                    }
                    llama_batch_free(b); llama_free(ctx);
                }

                static void quiet(enum ggml_log_level level, const char *text, void *data) {
                    (void) data; if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
                }

                int main(int argc, char **argv) {
                    if (argc < 2) { fprintf(stderr, "usage: %%s MODEL.gguf\\n", argv[0]); return 2; }
                    llama_log_set(quiet, NULL);
                    llama_backend_init();
                    struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
                    if (!model) { fprintf(stderr, "cannot load %%s\\n", argv[1]); return 2; }
                    int nv = llama_vocab_n_tokens(llama_model_get_vocab(model)), shared = 0;
                    run(model, 0, OPS0, N0); run(model, 1, OPS1, N1);
                    for (int p = 0; p < MAXLEN; p++) for (int s = 0; s < NSEQ; s++) {
                        float *a = LOGITS[0][s][p], *c = LOGITS[1][s][p]; if (!a || !c) continue;
                        double num = 0, den = 0; int ia = 0, ic = 0; shared++;
                        for (int v = 0; v < nv; v++) { num += (c[v] - a[v]) * (double) (c[v] - a[v]); den += a[v] * (double) a[v];
                            if (a[v] > a[ia]) ia = v; if (c[v] > c[ic]) ic = v; }
                        double rel = sqrt(num / den);
                        if (rel > %s) { printf("DISAGREE sequence %%d position %%d: logits rel L2 %%.3g (tolerance %s), greedy token A %%d vs B %%d\\n", s, p, rel, ia, ic); return 1; }
                    }
                    printf("agree: %%d shared positions within %s\\n", shared);
                    return 0;
                }
                """, st.nCtx() > 0 ? st.nCtx() : 256, st.nBatch() > 0 ? st.nBatch() : (st.nCtx() > 0 ? st.nCtx() : 256),
                st.nUbatch() > 0 ? st.nUbatch() : (st.nBatch() > 0 ? st.nBatch() : (st.nCtx() > 0 ? st.nCtx() : 256)),
                st.swaFull() ? "true" : "false", ggmlType(st.typeK()), ggmlType(st.typeV()), st.flashAttention() ? 1 : 0,
                Double.toString(tolerance), String.format(Locale.ROOT, "%.3g", tolerance), String.format(Locale.ROOT, "%.3g", tolerance)));
        return c.toString();
    }
}
