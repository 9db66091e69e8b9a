package airlock

import "testing"

func TestImportsHeavy(t *testing.T) {
	for _, tc := range []struct {
		code string
		want bool
	}{
		{"import pandas as pd\ndf = pd.DataFrame()", true},
		{"import numpy", true},
		{"import os, numpy as np", true},
		{"from pandas import DataFrame", true},
		{"from numpy.linalg import norm", true},
		{"def f():\n    import pandas\n    return pandas", true},
		{"x = 1; import numpy", true},
		{"print(1)", false},
		{"import numpy_financial", false},
		{"import mypandas", false},
		{"# we could import numpy here\nprint(2)", false},
		{"s = 'numpy and pandas'", false},
		{"__import__('pandas')", false}, // the lean image imports it lazily
		{"from os import path\npandas = 1", false},
		{"import unittest\nclass T(unittest.TestCase): pass", true},
		{"import asyncio", true},
		{"import xml.etree.ElementTree as ET", true},
		{"from urllib.request import urlopen", true},
		{"import html5lib", false},
		{"from .logging import x", false},
		{"import os  # logging comes later", false},
		{"import json, re", false},
		{"import matplotlib.pyplot as plt", true},
		{"from PIL import Image", true},
		{"import seaborn as sns", true},
		{"import matplotlib_venn", false},
	} {
		if got := importsHeavy(tc.code); got != tc.want {
			t.Errorf("importsHeavy(%q) = %v, want %v", tc.code, got, tc.want)
		}
	}
}
