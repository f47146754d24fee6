/* keeps ot_test_support non-empty */
int ot_test_support_none_(void);
int ot_test_support_none_(void) { return 0; }
