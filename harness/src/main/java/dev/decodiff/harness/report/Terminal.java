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

    /**
     * A report rendered for the terminal with input text made safe ({@link dev.decodiff.harness.Printable}): every
     * control character in it is escaped, except the codes of the report's own colours. It is rendered twice: plain,
     * to find a private-use character the text does not hold, then with that character standing in for ESC in the
     * style codes, so that after escaping it can only mark a code the styles wrote, never one from a tensor's name.
     */
    public static String safe(boolean colour, java.util.function.Function<Style, String> render) {
        String plain = render.apply(new Style(false));
        if (!colour) return dev.decodiff.harness.Printable.lines(plain);
        char mark = 0;
        for (char c = '\ue000'; c <= '\uf8ff' && mark == 0; c++) if (plain.indexOf(c) < 0) mark = c;
        if (mark == 0) return dev.decodiff.harness.Printable.lines(plain);
        return dev.decodiff.harness.Printable.lines(render.apply(new Style(true, mark))).replace(mark, '\u001b');
    }

    /** ANSI styling that collapses to plain text when colour is off; {@code esc} starts each code (ESC, or a stand-in for {@link #safe}). */
    public record Style(boolean on, char esc) {
        public Style(boolean on) { this(on, '\u001b'); }

        private String code(String sgr, String s) { return on ? esc + "[" + sgr + "m" + s + esc + "[0m" : s; }

        public String red(String s) { return code("31", s); }
        public String boldRed(String s) { return code("1;31", s); }
        public String green(String s) { return code("32", s); }
        public String boldGreen(String s) { return code("1;32", s); }
        public String yellow(String s) { return code("33", s); }
        public String dim(String s) { return code("2", s); }
        public String bold(String s) { return code("1", s); }
    }
}
