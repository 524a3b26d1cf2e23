package dev.decodiff.tests;

import dev.decodiff.harness.cli.Main;

import java.io.PrintWriter;
import java.io.StringWriter;

/** Runs decodiff's CLI in-process, capturing stdout and stderr. */
record Cli(int code, String out, String err) {
    static Cli run(String... args) {
        var out = new StringWriter();
        var err = new StringWriter();
        int code = Main.commandLine(new PrintWriter(out, true), new PrintWriter(err, true)).execute(args);
        return new Cli(code, out.toString(), err.toString());
    }

    @Override
    public String toString() { return "exit " + code + "\n--- stdout\n" + out + "--- stderr\n" + err; }
}
