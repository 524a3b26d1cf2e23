package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.cli.Main;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;

/** Runs decodiff's CLI in-process, capturing stdout and stderr. */
record Cli(int code, String out, String err) {
    private static final ObjectMapper JSON = new ObjectMapper();

    static Cli run(String... args) {
        var out = new StringWriter();
        var err = new StringWriter();
        int code = Main.commandLine(new PrintWriter(out, true), new PrintWriter(err, true)).execute(args);
        return new Cli(code, out.toString(), err.toString());
    }

    /** stdout as the JSON document a --json run prints (failing, with the whole run shown, when it is not one). */
    JsonNode json() throws IOException {
        org.assertj.core.api.Assertions.assertThat(out).as(toString()).startsWith("{");
        return JSON.readTree(out);
    }

    @Override
    public String toString() { return "exit " + code + "\n--- stdout\n" + out + "--- stderr\n" + err; }
}
