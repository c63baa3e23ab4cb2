/* The Merged view's tree cursor. The merged tree is rebuilt from live stacks at every frame,
 * and its rows move when counts change (siblings are sorted by count) or ranks move on, so the
 * cursor is kept as a node, not a row: the ids of its node and of that node's ancestors,
 * innermost first (a node's id hashes its frame path, so it is the same node in every
 * rebuild). After each rebuild the cursor goes to the node's line, or, while that node is not
 * shown (no rank is there at this moment, or an ancestor is folded), to its deepest ancestor
 * that is, and back to the node when it returns; only a key or a search moves the anchor. The
 * cursor itself is the lower pane's (lsel, drawn and scrolled as the Rank view's); w decides
 * whether the Merged view's arrows move it or the rank table's selection. UI thread only. */
#include "ui_priv.h"

/* The lower pane holds the Merged view's tree lines (not its flat form or the locals pane). */
static bool tree_lines(const struct ui *u)
{
    return u->view == VIEW_MERGED && !u->flat && !u->loc_on;
}

bool ui_tree_owns_arrows(const struct ui *u)
{
    return u->view == VIEW_RANK || (u->view == VIEW_MERGED && !u->flat && u->tree_focus);
}

void ui_tree_anchor(struct ui *u)
{
    int i = u->lsel, depth;

    if (!tree_lines(u) || i < 0 || i >= u->nlines || !u->lines[i].node)
        return;
    u->ntpath = 0;
    u->tpath[u->ntpath++] = u->lines[i].node;
    /* The lines are depth first: a node's parent is the nearest line above it that is less
     * deep. */
    depth = u->lines[i].tdepth;
    for (int j = i - 1; j >= 0 && depth > 0 && u->ntpath < UI_TREE_PATH; j--)
        if (u->lines[j].node && u->lines[j].tdepth < depth) {
            u->tpath[u->ntpath++] = u->lines[j].node;
            depth = u->lines[j].tdepth;
        }
}

void ui_tree_restore(struct ui *u)
{
    /* Without w the Merged view keeps its cursor as a row, as before: only a search shows it. */
    if (!tree_lines(u) || !u->tree_focus)
        return;
    for (int k = 0; k < u->ntpath; k++)
        for (int i = 0; i < u->nlines; i++)
            if (u->lines[i].node == u->tpath[k]) {
                u->lsel = i;
                return;
            }
    if (u->lsel >= u->nlines)
        u->lsel = u->nlines > 0 ? u->nlines - 1 : 0;
}
