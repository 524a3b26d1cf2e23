package dev.decodiff.harness.report;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/** What the terminal can take: colour only on a TTY with NO_COLOR unset; a progress bar only when stderr is a TTY. */
public final class Terminal {
    private static final MethodHandle ISATTY = isattyHandle();

    private Terminal() {}

    private static MethodHandle isattyHandle() {
        try {
            var linker = Linker.nativeLinker();
            return linker.defaultLookup().find("isatty")
                    .map(f -> linker.downcallHandle(f, FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT)))
                    .orElse(null);
        } catch (Throwable t) {
            return null;
        }
    }

    /** isatty(fd) through FFM; false when it cannot be asked. */
    public static boolean isTty(int fd) {
        if (ISATTY == null) return false;
        try {
            return (int) ISATTY.invokeExact(fd) == 1;
        } catch (Throwable t) {
            return false;
        }
    }

    public static boolean colourStdout() {
        String nc = System.getenv("NO_COLOR");
        return (nc == null || nc.isEmpty()) && !"dumb".equals(System.getenv("TERM")) && isTty(1);
    }

    /** The launcher filters stderr through a pipe and passes -Ddecodiff.stderr.tty=true when it was a terminal. */
    public static boolean progressOnStderr() {
        return (isTty(2) || Boolean.getBoolean("decodiff.stderr.tty")) && !"dumb".equals(System.getenv("TERM"));
    }

    /** ANSI styling that collapses to plain text when colour is off. */
    public record Style(boolean on) {
        public String red(String s) { return on ? "\u001b[31m" + s + "\u001b[0m" : s; }
        public String boldRed(String s) { return on ? "\u001b[1;31m" + s + "\u001b[0m" : s; }
        public String green(String s) { return on ? "\u001b[32m" + s + "\u001b[0m" : s; }
        public String boldGreen(String s) { return on ? "\u001b[1;32m" + s + "\u001b[0m" : s; }
        public String yellow(String s) { return on ? "\u001b[33m" + s + "\u001b[0m" : s; }
        public String dim(String s) { return on ? "\u001b[2m" + s + "\u001b[0m" : s; }
        public String bold(String s) { return on ? "\u001b[1m" + s + "\u001b[0m" : s; }
    }
}
