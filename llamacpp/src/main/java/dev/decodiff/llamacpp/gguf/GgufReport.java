package dev.decodiff.llamacpp.gguf;

import java.io.PrintWriter;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/** `decodiff inspect FILE.gguf`: the header, every metadata entry (long arrays abbreviated) and every tensor. */
public final class GgufReport {
    private GgufReport() {}

    public static void print(GgufFile f, PrintWriter out) {
        long bytes = 0;
        var byType = new TreeMap<GgmlType, Integer>();
        for (var t : f.tensors()) {
            bytes += t.byteSize();
            byType.merge(t.type(), 1, Integer::sum);
        }
        var arch = f.metadata().get("general.architecture");
        out.println("gguf " + f.path() + "  (GGUF v" + f.version() + ", alignment " + f.alignment() + ")");
        out.println("  architecture " + (arch == null ? "(none)" : arch.describe()));
        out.printf(Locale.ROOT, "  tensors      %d, %s of data, by type %s%n", f.tensors().size(), human(bytes), byType);
        out.println("  metadata     " + f.metadata().size() + " keys");
        out.println();
        int w = f.metadata().keySet().stream().mapToInt(String::length).max().orElse(10);
        for (Map.Entry<String, GgufValue> e : f.metadata().entrySet()) {
            var v = e.getValue();
            String type = v.type() == GgufValueType.ARRAY ? "array" : v.type().name().toLowerCase(Locale.ROOT);
            out.printf(Locale.ROOT, "  %-" + w + "s  %-7s  %s%n", e.getKey(), type, v.describe());
        }
        out.println();
        int nw = f.tensors().stream().mapToInt(t -> t.name().length()).max().orElse(10);
        out.printf(Locale.ROOT, "  %-" + nw + "s  %-5s  %-22s  %s%n", "tensor", "type", "ne (ggml order)", "bytes");
        for (var t : f.tensors())
            out.printf(Locale.ROOT, "  %-" + nw + "s  %-5s  %-22s  %s%n", t.name(), t.type(), t.shapeString(), human(t.byteSize()));
        for (var m : KvSharing.llamaCppMismatches(f.metadata()))
            out.println("  warning: " + m);
    }

    private static String human(long b) {
        if (b < 1024) return b + " B";
        if (b < 1024 * 1024) return String.format(Locale.ROOT, "%.1f KiB", b / 1024.0);
        if (b < 1024L * 1024 * 1024) return String.format(Locale.ROOT, "%.1f MiB", b / 1048576.0);
        return String.format(Locale.ROOT, "%.2f GiB", b / 1073741824.0);
    }
}
