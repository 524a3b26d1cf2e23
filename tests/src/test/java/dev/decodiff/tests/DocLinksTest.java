package dev.decodiff.tests;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every relative link in README.md and docs/**.md leads somewhere: the file or folder exists, and an anchor names a
 * heading of the page it points into (as GitHub makes anchors from headings). Links inside code blocks are text.
 */
class DocLinksTest {
    private static final Path ROOT = ReferenceCases.repoRoot();
    private static final Pattern LINK = Pattern.compile("\\[[^\\]]*\\]\\(([^)\\s]+)\\)");
    private static final Pattern HEADING = Pattern.compile("^#{1,6}\\s+(.*?)\\s*#*\\s*$");

    @Test
    void everyRelativeLinkInTheReadmeAndTheDocsResolves() throws IOException {
        var pages = new ArrayList<Path>(List.of(ROOT.resolve("README.md")));
        try (Stream<Path> s = Files.walk(ROOT.resolve("docs"))) {
            s.filter(p -> p.toString().endsWith(".md")).sorted().forEach(pages::add);
        }
        var broken = new ArrayList<String>();
        int checked = 0;
        for (Path page : pages) {
            for (String target : links(page)) {
                if (target.matches("^[a-zA-Z][a-zA-Z0-9+.-]*:.*")) continue; // https:, mailto:: not files
                checked++;
                int hash = target.indexOf('#');
                String file = hash < 0 ? target : target.substring(0, hash), anchor = hash < 0 ? null : target.substring(hash + 1);
                Path dest = file.isEmpty() ? page : page.getParent().resolve(file).normalize();
                if (!Files.exists(dest)) {
                    broken.add(ROOT.relativize(page) + ": " + target + " (no such file)");
                    continue;
                }
                if (anchor != null && dest.toString().endsWith(".md") && !anchors(dest).contains(anchor))
                    broken.add(ROOT.relativize(page) + ": " + target + " (no heading makes the anchor #" + anchor + ")");
            }
        }
        assertThat(checked).as("links checked").isGreaterThan(30);
        assertThat(broken).isEmpty();
    }

    @Test
    void anchorsAreMadeAsGitHubMakesThem() {
        assertThat(slug("Below the tensor, above the noise: `ops` and `calibrate`")).isEqualTo("below-the-tensor-above-the-noise-ops-and-calibrate");
        assertThat(slug("On an AMD Zen 4 host (AVX-512 with BF16 and VNNI, no AMX)")).isEqualTo("on-an-amd-zen-4-host-avx-512-with-bf16-and-vnni-no-amx");
        assertThat(slug("4.1 The completeness mark")).isEqualTo("41-the-completeness-mark");
    }

    /** The link targets of a Markdown page, outside fenced code blocks and inline code. */
    private static List<String> links(Path page) throws IOException {
        var out = new ArrayList<String>();
        boolean fenced = false;
        for (String line : Files.readAllLines(page)) {
            if (line.stripLeading().startsWith("```")) {
                fenced = !fenced;
                continue;
            }
            if (fenced) continue;
            var m = LINK.matcher(line.replaceAll("`[^`]*`", "``"));
            while (m.find()) out.add(m.group(1));
        }
        return out;
    }

    private static final Map<Path, Set<String>> ANCHORS = new HashMap<>();

    /** The anchors GitHub gives a page's headings: a repeated heading's gets -1, -2, … */
    private static Set<String> anchors(Path page) {
        return ANCHORS.computeIfAbsent(page, p -> {
            var seen = new HashMap<String, Integer>();
            var out = new HashSet<String>();
            boolean fenced = false;
            try {
                for (String line : Files.readAllLines(p)) {
                    if (line.stripLeading().startsWith("```")) fenced = !fenced;
                    var m = HEADING.matcher(line);
                    if (fenced || !m.matches()) continue;
                    String s = slug(m.group(1));
                    int n = seen.merge(s, 1, Integer::sum);
                    out.add(n == 1 ? s : s + "-" + (n - 1));
                }
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
            return out;
        });
    }

    /** GitHub's rule: lower case, every character but letters, digits, marks, '_', '-' and space dropped, spaces to '-'. */
    static String slug(String heading) {
        String text = heading.replaceAll("\\[([^\\]]*)\\]\\([^)]*\\)", "$1"); // a link in a heading keeps its text
        return text.toLowerCase(Locale.ROOT).replaceAll("[^\\p{L}\\p{M}\\p{N}\\p{Pc} -]", "").replace(' ', '-');
    }
}
