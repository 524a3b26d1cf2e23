package dev.decodiff.llamacpp.ffi;

import java.io.IOException;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.PaddingLayout;
import java.lang.foreign.StructLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * The struct layouts of one llama.cpp build, read from that build's own headers: a small C program, compiled with the
 * machine's gcc, prints sizeof and alignment of each struct the bindings use and offsetof and sizeof of each field they
 * touch, and the value of each constant they pass. C through the compiler because only the compiler knows the ABI's
 * answer for a header it has never seen (a field added, a type widened). The answer is cached under
 * {@code ~/.cache/decodiff/layouts/} by the sha256 of the headers and the program, so the compiler runs once per build.
 * A header without a field the bindings touch, a field of another size, or a constant of another value is refused with
 * one line naming it.
 */
public final class LayoutProbe {
    private LayoutProbe() {}

    /** The headers the program includes (llama.h includes ggml.h, ggml-cpu.h and ggml-backend.h from ggml/include). */
    static final List<String> LLAMA_HEADERS = List.of("llama.h"), GGML_HEADERS = List.of("ggml.h", "ggml-backend.h", "ggml-cpu.h", "ggml-alloc.h");

    /** The layouts {@code home}'s libraries were built with. */
    public static LlamaLayouts of(LlamaCppHome home) {
        var headers = home.headers().orElseThrow(() -> new LlamaCppException("cannot find the llama.h that " + home.lib()
                + " was built from (looked beside it, in the source tree above it and in an install prefix); set -D"
                + LlamaCppHome.INCLUDE_PROPERTY + "=DIR (or $" + LlamaCppHome.INCLUDE_ENV + ") to the folder of that llama.h"));
        return of(headers, LlamaCppHome.userCache().resolve("layouts"));
    }

    /** The layouts these headers give, cached in {@code cache}. */
    public static LlamaLayouts of(LlamaCppHome.Headers headers, Path cache) {
        String program = program();
        String key;
        try {
            key = sha256(headers, program);
        } catch (IOException e) {
            throw new LlamaCppException("cannot read llama.cpp's headers in " + headers.llama() + ": " + e.getMessage(), e);
        }
        Path cached = cache.resolve(key + ".txt");
        String out;
        if (Files.isReadable(cached)) {
            try {
                out = Files.readString(cached);
            } catch (IOException e) {
                throw new LlamaCppException("cannot read " + cached + ": " + e.getMessage() + "; delete it to probe the headers again", e);
            }
        } else if (!onPath("gcc") && sha256(headers.llama().resolve("llama.h")).equals(PINNED_LLAMA_H_SHA256)) {
            // without a compiler, the pinned release's own header is the one case the bindings know without asking
            return LlamaLayouts.pinned();
        } else {
            out = compileAndRun(headers, program);
            try {
                Files.createDirectories(cache);
                Path tmp = Files.createTempFile(cache, key, ".partial");
                Files.writeString(tmp, out);
                Files.move(tmp, cached, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (IOException e) {
                // an unwritable cache only costs the next run another compile
            }
        }
        return layouts(parse(out), headers.llama().resolve("llama.h"));
    }

    /** The C program: one line "name value" per struct size and alignment, field offset and size, and constant. */
    static String program() {
        var c = new StringBuilder("#include <stdio.h>\n#include <stddef.h>\n#include <stdalign.h>\n#include \"llama.h\"\n#include \"ggml-backend.h\"\n#include \"ggml-cpu.h\"\nint main(void) {\n");
        for (StructLayout s : LlamaLayouts.ALL) {
            String st = s.name().orElseThrow();
            c.append("  printf(\"").append(st).append(" %zu %zu\\n\", sizeof(struct ").append(st).append("), alignof(struct ").append(st).append("));\n");
            for (MemoryLayout m : s.memberLayouts()) {
                if (m instanceof PaddingLayout) continue;
                String f = m.name().orElseThrow();
                c.append("  printf(\"").append(st).append('.').append(f).append(" %zu %zu\\n\", offsetof(struct ").append(st).append(", ").append(f)
                        .append("), sizeof(((struct ").append(st).append(" *) 0)->").append(f).append("));\n");
            }
        }
        for (var k : LlamaLayouts.constants().keySet())
            c.append("  printf(\"").append(k).append(" %ld\\n\", (long) (").append(k).append("));\n");
        return c.append("  return 0;\n}\n").toString();
    }

    /** sha256 of llama.h of the pinned release (llama.cpp v0.5.0 in node-llama-cpp 3.22.1). */
    static final String PINNED_LLAMA_H_SHA256 = "0199c9f12a5dd4099191a9b508d62ad715212981d181046a0d29750c57dd8694";

    private static String sha256(Path file) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file)));
        } catch (IOException | java.security.NoSuchAlgorithmException e) {
            return "";
        }
    }

    static boolean onPath(String tool) {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator))
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, tool))) return true;
        return false;
    }

    private static String sha256(LlamaCppHome.Headers h, String program) throws IOException {
        try {
            var md = MessageDigest.getInstance("SHA-256");
            for (String f : LLAMA_HEADERS) md.update(Files.readAllBytes(h.llama().resolve(f)));
            for (String f : GGML_HEADERS) if (Files.exists(h.ggml().resolve(f))) md.update(Files.readAllBytes(h.ggml().resolve(f)));
            md.update(program.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(md.digest());
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private static final Pattern NO_MEMBER = Pattern.compile("'struct (\\w+)' has no member named '(\\w+)'"),
            UNDECLARED = Pattern.compile("'(\\w+)' undeclared"), INCOMPLETE = Pattern.compile("invalid application of '\\w+' to incomplete type 'struct (\\w+)'");

    private static String compileAndRun(LlamaCppHome.Headers h, String program) {
        Path dir = null;
        try {
            dir = Files.createTempDirectory("decodiff-layouts");
            Path src = dir.resolve("layouts.c"), exe = dir.resolve("layouts");
            Files.writeString(src, program);
            var gcc = run(dir, "gcc", "-std=c11", "-I", h.llama().toString(), "-I", h.ggml().toString(), "-o", exe.toString(), src.toString());
            if (gcc.code != 0 || !Files.exists(exe)) {
                // gcc quotes with typographic quotes in a UTF-8 locale, with ASCII ones in C
                String errors = gcc.out.replace('\u2018', '\'').replace('\u2019', '\'');
                var m = NO_MEMBER.matcher(errors);
                if (m.find()) throw differs(h.llama().resolve("llama.h"), "struct " + m.group(1) + " has no field '" + m.group(2) + "', which the bindings use");
                m = INCOMPLETE.matcher(errors);
                if (m.find()) throw differs(h.llama().resolve("llama.h"), "struct " + m.group(1) + " is not defined, and the bindings use it");
                m = UNDECLARED.matcher(errors);
                if (m.find()) throw differs(h.llama().resolve("llama.h"), m.group(1) + " is not defined, and the bindings use it");
                throw new LlamaCppException("gcc could not compile decodiff's layout probe against " + h.llama().resolve("llama.h") + ": "
                        + firstError(gcc.out));
            }
            var ran = run(dir, exe.toString());
            if (ran.code != 0) throw new LlamaCppException("decodiff's layout probe for " + h.llama().resolve("llama.h") + " failed: " + ran.out.strip());
            return ran.out;
        } catch (IOException e) {
            String why = e.getMessage() != null && e.getMessage().contains("gcc") ? "gcc not found" : String.valueOf(e.getMessage());
            throw new LlamaCppException("cannot read llama.cpp's struct layouts from " + h.llama().resolve("llama.h") + " (" + why
                    + "): decodiff compiles a small C program against the headers of the build it loads; install gcc (Debian: apt-get install gcc)", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new LlamaCppException("interrupted while probing llama.cpp's struct layouts", e);
        } finally {
            if (dir != null) deleteQuietly(dir);
        }
    }

    private static String firstError(String gccOut) {
        for (String line : gccOut.split("\n")) if (line.contains("error")) return line.strip();
        return gccOut.strip();
    }

    private static Map<String, long[]> parse(String out) {
        var values = new HashMap<String, long[]>();
        for (String line : out.strip().split("\n")) {
            String[] f = line.strip().split(" ");
            long[] v = new long[f.length - 1];
            for (int i = 1; i < f.length; i++) v[i - 1] = Long.parseLong(f[i]);
            values.put(f[0], v);
        }
        return values;
    }

    /** The bindings' structs rebuilt at the probed offsets; a difference the bindings cannot follow is refused. */
    static LlamaLayouts layouts(Map<String, long[]> probed, Path header) {
        for (var c : LlamaLayouts.constants().entrySet()) {
            long[] v = probed.get(c.getKey());
            if (v == null) throw new LlamaCppException("the layout probe of " + header + " printed no value for " + c.getKey()
                    + "; delete ~/.cache/decodiff/layouts to probe again");
            if (v[0] != c.getValue())
                throw differs(header, c.getKey() + " is " + v[0] + ", the bindings pass " + c.getValue());
        }
        var built = new ArrayList<StructLayout>();
        for (StructLayout s : LlamaLayouts.ALL) built.add(rebuild(s, probed, header));
        return new LlamaLayouts(built.get(0), built.get(1), built.get(2), built.get(3), built.get(4), built.get(5), header.toString());
    }

    private static StructLayout rebuild(StructLayout s, Map<String, long[]> probed, Path header) {
        String st = s.name().orElseThrow();
        long[] whole = probed.get(st);
        record Placed(MemoryLayout layout, long offset) {}
        var fields = new ArrayList<Placed>();
        for (MemoryLayout m : s.memberLayouts()) {
            if (m instanceof PaddingLayout) continue;
            String f = m.name().orElseThrow();
            long[] v = probed.get(st + "." + f);
            if (v[1] != m.byteSize())
                throw differs(header, "field '" + f + "' of struct " + st + " is " + v[1] + " bytes, the bindings read " + m.byteSize());
            if (v[0] % m.byteAlignment() != 0)
                throw differs(header, "field '" + f + "' of struct " + st + " sits at offset " + v[0] + ", not aligned for what the bindings read");
            fields.add(new Placed(m, v[0]));
        }
        fields.sort(Comparator.comparingLong(Placed::offset));
        var members = new ArrayList<MemoryLayout>();
        long at = 0;
        for (var p : fields) {
            if (p.offset < at) throw differs(header, "fields of struct " + st + " overlap (a union?) at offset " + p.offset);
            if (p.offset > at) members.add(MemoryLayout.paddingLayout(p.offset - at));
            members.add(p.layout);
            at = p.offset + p.layout.byteSize();
        }
        if (whole[0] > at) members.add(MemoryLayout.paddingLayout(whole[0] - at));
        var rebuilt = MemoryLayout.structLayout(members.toArray(MemoryLayout[]::new));
        if (whole[1] > rebuilt.byteAlignment()) rebuilt = rebuilt.withByteAlignment(whole[1]);
        return rebuilt.withName(st);
    }

    private static LlamaCppException differs(Path header, String difference) {
        return new LlamaCppException("llama.cpp's API differs from what decodiff's bindings support (" + LlamaCppHome.RELEASE + "): in "
                + header + ", " + difference + "; use a build of llama.cpp " + LlamaCppHome.RELEASE + " (scripts/llamacpp-native.sh builds one)");
    }

    private record Result(int code, String out) {}

    private static Result run(Path dir, String... cmd) throws IOException, InterruptedException {
        var pb = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true);
        pb.environment().put("LC_ALL", "C");
        var p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IOException(cmd[0] + " did not finish within 120 s");
        }
        return new Result(p.exitValue(), out);
    }

    private static void deleteQuietly(Path dir) {
        try (var files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        } catch (IOException e) {
            // a temp folder left behind is harmless
        }
    }
}
