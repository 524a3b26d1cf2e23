package dev.decodiff.harness.dump;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.CapturePoints;
import dev.decodiff.harness.BadInputException;
import dev.decodiff.metal.TensorView;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * A dump's declared cut of its k_read/v_read rows (manifest {@code "read_rows": "last:N"}, docs/dump-format.md §4.3):
 * the producer kept only the last N of the positions each step's last query reads, so that a long context's full
 * layers do not make a dump terabytes. A comparison judges the other side's read on those same last positions; a
 * read the declaration does not account for is still a shape mismatch.
 */
public record ReadRows(int last) {
    public static final String FIELD = "read_rows";
    private static final Pattern FORM = Pattern.compile("last:([1-9][0-9]{0,8})");

    /** The declaration in manifest.json, or null when the dump holds every row it reads. */
    public static ReadRows of(Path manifestFile) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(Files.readString(manifestFile));
        } catch (IOException e) {
            throw new BadInputException(manifestFile, "cannot be read: " + e.getMessage());
        }
        JsonNode n = root == null ? null : root.get(FIELD);
        if (n == null || n.isNull()) return null;
        var m = n.isTextual() ? FORM.matcher(n.asText()) : null;
        if (m == null || !m.matches())
            throw new BadInputException(manifestFile, "\"" + FIELD + "\" is " + n + "; it is \"last:N\" (N ≥ 1: the producer kept the last N rows of "
                    + "each k_read/v_read) or absent; fix the manifest or re-create the dump");
        return new ReadRows(Integer.parseInt(m.group(1)));
    }

    /** Every k_read/v_read of every step within the declaration: a dump holding more rows than it declares is broken. */
    public List<String> problems(Path manifestFile, DumpManifest m, List<Map<String, long[]>> stepShapes) {
        var out = new ArrayList<String>();
        for (int s = 0; s < stepShapes.size(); s++)
            for (var e : stepShapes.get(s).entrySet())
                if (CapturePoints.isCacheRead(CapturePoints.kindOf(e.getKey())) && e.getValue().length >= 1 && e.getValue()[0] > last)
                    out.add(m.step(s).file() + ": tensor '" + e.getKey() + "' holds " + e.getValue()[0] + " rows but " + manifestFile
                            + " declares \"" + FIELD + "\": \"last:" + last + "\" (at most " + last + ")");
        return out;
    }

    /**
     * The two sides of a k_read/v_read cell, made comparable when one side declares a cut and holds exactly the last
     * min(N, C) of the other side's C rows: the other side is then viewed on its last rows. Otherwise both unchanged.
     */
    public static TensorView[] align(String point, TensorView ref, TensorView cand, ReadRows refRows, ReadRows candRows) {
        if (!CapturePoints.isCacheRead(CapturePoints.kindOf(point)) || ref.rank() != cand.rank() || ref.rank() < 1) return new TensorView[]{ref, cand};
        for (int i = 1; i < ref.rank(); i++) if (ref.dim(i) != cand.dim(i)) return new TensorView[]{ref, cand};
        long r = ref.dim(0), c = cand.dim(0);
        if (c < r && candRows != null && c == Math.min(candRows.last, r)) return new TensorView[]{lastRows(ref, c), cand};
        if (r < c && refRows != null && r == Math.min(refRows.last, c)) return new TensorView[]{ref, lastRows(cand, r)};
        return new TensorView[]{ref, cand};
    }

    /** The last n rows of a row-major tensor: a tail of its bytes, no copy. */
    static TensorView lastRows(TensorView t, long n) {
        long rowBytes = t.data().byteSize() / t.dim(0);
        long[] shape = t.shape().clone();
        shape[0] = n;
        return new TensorView(t.name(), t.dtype(), shape, t.data().asSlice((t.dim(0) - n) * rowBytes, n * rowBytes));
    }

    @Override
    public String toString() { return "last:" + last; }
}
