package dev.decodiff.llamacpp.ffi;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.PaddingLayout;
import java.lang.foreign.StructLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** The hand-written struct layouts against a C compiler's sizeof/offsetof on the headers of the pinned release. */
class LayoutTest {
    @TempDir
    Path tmp;

    @Test
    void everyBoundStructHasTheSizeAndFieldOffsetsTheCompilerGivesIt() throws Exception {
        var home = LlamaCppTestSupport.requireHome();
        Assumptions.assumeTrue(onPath("gcc"), "gcc not found: the layout check needs a C compiler");
        Path src = home.sources();
        assertThat(src.resolve("include/llama.h")).as("headers cached by scripts/llamacpp.sh").exists();

        var c = new StringBuilder("#include <stdio.h>\n#include <stddef.h>\n#include \"llama.h\"\n#include \"ggml-backend.h\"\nint main(void) {\n");
        int fields = 0;
        for (StructLayout s : LlamaLayouts.ALL) {
            String struct = s.name().orElseThrow();
            c.append("  printf(\"%s %zu\\n\", \"").append(struct).append("\", sizeof(struct ").append(struct).append("));\n");
            for (MemoryLayout m : s.memberLayouts()) {
                if (m instanceof PaddingLayout) continue;
                String f = m.name().orElseThrow();
                c.append("  printf(\"%s %zu\\n\", \"").append(struct).append('.').append(f)
                        .append("\", offsetof(struct ").append(struct).append(", ").append(f).append("));\n");
                fields++;
            }
        }
        // the enum values and macros the bindings pass or compare, under their C names
        var constants = LlamaLayouts.constants();
        for (var k : constants.keySet()) c.append("  printf(\"%s %ld\\n\", \"").append(k).append("\", (long) ").append(k).append(");\n");
        c.append("  return 0;\n}\n");
        Path prog = tmp.resolve("layouts.c"), exe = tmp.resolve("layouts");
        Files.writeString(prog, c);
        String compiled = run(tmp, "gcc", "-std=c11", "-I", src.resolve("include").toString(), "-I", src.resolve("ggml/include").toString(),
                "-o", exe.toString(), prog.toString());
        assertThat(Files.exists(exe)).as("gcc output: " + compiled).isTrue();

        Map<String, Long> fromC = new HashMap<>();
        for (String line : run(tmp, exe.toString()).strip().split("\n")) {
            String[] kv = line.split(" ");
            fromC.put(kv[0], Long.parseLong(kv[1]));
        }
        assertThat(fromC).hasSize(LlamaLayouts.ALL.size() + fields + constants.size());
        constants.forEach((k, v) -> assertThat(v).as(k).isEqualTo(fromC.get(k)));
        for (StructLayout s : LlamaLayouts.ALL) {
            String struct = s.name().orElseThrow();
            assertThat(s.byteSize()).as("sizeof(struct %s)", struct).isEqualTo(fromC.get(struct));
            for (MemoryLayout m : s.memberLayouts()) {
                if (m instanceof PaddingLayout) continue;
                String f = m.name().orElseThrow();
                assertThat(LlamaLayouts.offset(s, f)).as("offsetof(struct %s, %s)", struct, f).isEqualTo(fromC.get(struct + "." + f));
            }
        }
    }

    static boolean onPath(String tool) {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(":"))
            if (Files.isExecutable(Path.of(dir, tool))) return true;
        return false;
    }

    static String run(Path dir, String... cmd) throws IOException, InterruptedException {
        var p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        return out;
    }
}
