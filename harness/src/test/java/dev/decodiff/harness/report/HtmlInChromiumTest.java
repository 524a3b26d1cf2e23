package dev.decodiff.harness.report;

import dev.decodiff.harness.SyntheticDump;
import dev.decodiff.harness.compare.Comparison;
import dev.decodiff.harness.dump.CapturedTensor;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import javax.imageio.ImageIO;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** Opens the HTML report in headless Chromium (Debian package `chromium`) and checks the screenshot is not blank. */
class HtmlInChromiumTest {
    @TempDir
    Path tmp;

    static Path chromium() {
        for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin").split(":"))
            for (String name : List.of("chromium", "chromium-browser", "google-chrome"))
                if (Files.isExecutable(Path.of(dir, name))) return Path.of(dir, name);
        return null;
    }

    @Test
    void reportRendersInHeadlessChromium() throws Exception {
        Path chrome = chromium();
        if (chrome == null && "true".equals(System.getenv("CI")))
            throw new AssertionError("chromium is not installed, but CI must have it (.ci/run installs the Debian package `chromium`)");
        Assumptions.assumeTrue(chrome != null, "chromium not installed locally (apt-get install -y chromium); skipping the browser check");

        Path ref = SyntheticDump.write(tmp.resolve("ref"), SyntheticDump.NONE);
        Path cand = SyntheticDump.write(tmp.resolve("cand"), (s, t) -> {
            if (s >= 1) {
                var k = t.get("layers.1.attn.k_read");
                t.put("layers.1.attn.v_read", new CapturedTensor("layers.1.attn.v_read", k.shape(), k.data().clone()));
            }
        });
        var result = Comparison.compareDumps(ref, cand, Comparison.Options.defaults());
        Path html = Files.writeString(tmp.resolve("report.html"), HtmlReport.render(result));
        Path png = tmp.resolve("shot.png");
        var pb = new ProcessBuilder(chrome.toString(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--hide-scrollbars", "--user-data-dir=" + tmp.resolve("profile"),
                "--window-size=1200,1400", "--screenshot=" + png, html.toUri().toString())
                .redirectErrorStream(true).redirectOutput(tmp.resolve("chromium.log").toFile());
        var p = pb.start();
        boolean done = p.waitFor(90, TimeUnit.SECONDS);
        if (!done) p.destroyForcibly();
        assertThat(done).as("chromium finished within 90 s").isTrue();
        assertThat(png).as("screenshot written; chromium log:\n" + Files.readString(tmp.resolve("chromium.log"))).exists();

        Files.createDirectories(Path.of("target"));
        Files.copy(png, Path.of("target/html-report-screenshot.png"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        Files.copy(html, Path.of("target/html-report.html"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        var img = ImageIO.read(png.toFile());
        assertThat(img.getWidth()).isGreaterThan(500);
        long nonWhite = 0, reddish = 0;
        var colours = new HashSet<Integer>();
        for (int y = 0; y < img.getHeight(); y += 2)
            for (int x = 0; x < img.getWidth(); x += 2) {
                int rgb = img.getRGB(x, y) & 0xffffff;
                colours.add(rgb);
                if (rgb != 0xffffff) nonWhite++;
                int r = rgb >> 16 & 0xff, g = rgb >> 8 & 0xff, b = rgb & 0xff;
                if (r > 180 && g < 140 && b < 140) reddish++;
            }
        long sampled = (long) ((img.getWidth() + 1) / 2) * ((img.getHeight() + 1) / 2);
        assertThat(nonWhite).as("non-white share of the screenshot").isGreaterThan(sampled / 20);
        assertThat(colours.size()).as("distinct colours (heatmap, curves, text)").isGreaterThan(50);
        assertThat(reddish).as("failing heatmap cells are red").isGreaterThan(20);
    }
}
