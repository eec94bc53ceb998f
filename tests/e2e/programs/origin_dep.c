/* Found only through its loader's RUNPATH ($ORIGIN/origin_lib). */
int origin_dep_answer(void) { return 42; }
