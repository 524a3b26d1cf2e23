package dev.decodiff.harness;

import java.util.Collection;
import java.util.Locale;

/** "Did you mean …?" for a misspelled key: the valid name with the smallest edit distance. */
public final class NearestName {
    private NearestName() {}

    /** The closest of {@code valid} to {@code given} (ties: the first), or null when there is none. */
    public static String to(String given, Collection<String> valid) {
        String best = null;
        int bestDistance = Integer.MAX_VALUE;
        for (String v : valid) {
            int d = distance(given.toLowerCase(Locale.ROOT), v.toLowerCase(Locale.ROOT));
            if (d < bestDistance) {
                bestDistance = d;
                best = v;
            }
        }
        return best;
    }

    /** Levenshtein distance (insertions, deletions and substitutions cost 1). */
    static int distance(String a, String b) {
        int[] prev = new int[b.length() + 1], cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) prev[j] = j;
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++)
                cur[j] = Math.min(Math.min(cur[j - 1], prev[j]) + 1, prev[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1));
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev[b.length()];
    }
}
