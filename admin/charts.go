package admin

import (
	"fmt"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// The overview's charts: bar charts drawn on the server as inline SVG
// (templates/overview.html, "chart"), so the panel needs no script and its
// CSP no new source. A chart here is only numbers and the few strings this
// file writes; the template escapes them all the same.

// chartHours is the overview's window.
const chartHours = 24

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 460, 210
	plotL, plotR           = 44, 12 // room for the y labels, and the right edge
	plotT, plotB           = 30, 48 // the title above; x labels and legend below
	plotW, plotH           = chartW - plotL - plotR, chartH - plotT - plotB
	plotBottom             = plotT + plotH
	legendY, legendSwatchW = chartH - 10, 10
)

// chartSeries is one stacked series: its name, its CSS class (the fill, in
// static/style.css) and one value a slot.
type chartSeries struct {
	Name, Class string
	Values      []int64
}

// chart is what the "chart" template draws.
type chart struct {
	ID, Title, Desc, YLabel string
	W, H                    int
	PlotL, PlotR, PlotT     int // the plot's left and right x, its top y
	PlotBottom              int
	Bars                    []chartBar
	YTicks, XTicks          []chartTick
	Legend                  []chartLegend
}

type chartBar struct {
	Class   string
	X, Y    float64
	W, H    float64
	N       int64
	Tooltip string
}

type chartTick struct {
	X, Y  float64
	Label string
}

type chartLegend struct {
	Name, Class  string
	X, Y         int // the swatch's top left
	TextX, TextY int
}

// barChart stacks series over len(labels) slots; a slot's label is drawn
// under it unless empty, and names it in its bars' tooltips (full).
func barChart(id, title, yLabel, desc string, labels, full []string, series []chartSeries) chart {
	c := chart{ID: id, Title: title, Desc: desc, YLabel: yLabel, W: chartW, H: chartH,
		PlotL: plotL, PlotR: chartW - plotR, PlotT: plotT, PlotBottom: plotBottom}
	top := niceMax(maxStack(len(labels), series))
	scale := float64(plotH) / float64(top)
	slot := float64(plotW) / float64(max(len(labels), 1))
	for i := range labels {
		x := plotL + slot*float64(i) + slot*0.15
		y := float64(plotBottom)
		for _, s := range series {
			n := s.Values[i]
			if n <= 0 {
				continue
			}
			h := float64(n) * scale
			y -= h
			c.Bars = append(c.Bars, chartBar{Class: s.Class, X: round1(x), Y: round1(y), W: round1(slot * 0.7), H: round1(h),
				N: n, Tooltip: fmt.Sprintf("%s: %d %s", full[i], n, s.Name)})
		}
		if labels[i] != "" {
			c.XTicks = append(c.XTicks, chartTick{X: round1(x + slot*0.35), Y: plotBottom + 14, Label: labels[i]})
		}
	}
	for _, v := range yTicks(top) {
		c.YTicks = append(c.YTicks, chartTick{X: plotL - 6, Y: round1(float64(plotBottom) - float64(v)*scale), Label: fmt.Sprint(v)})
	}
	x := plotL
	for _, s := range series {
		c.Legend = append(c.Legend, chartLegend{Name: s.Name, Class: s.Class, X: x, Y: legendY - legendSwatchW + 1,
			TextX: x + legendSwatchW + 4, TextY: legendY})
		x += legendSwatchW + 8 + 7*len(s.Name) + 16
	}
	return c
}

// maxStack is the largest slot's total.
func maxStack(slots int, series []chartSeries) int64 {
	var top int64
	for i := range slots {
		var n int64
		for _, s := range series {
			n += max(s.Values[i], 0)
		}
		top = max(top, n)
	}
	return top
}

// niceMax is the y axis' top: n rounded up to 1, 2 or 5 times a power of
// ten, at least 1.
func niceMax(n int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
	}
}

// yTicks are the labelled values on an axis topped at top: 0, the middle
// when it is whole, and top.
func yTicks(top int64) []int64 {
	if top%2 == 0 {
		return []int64{0, top / 2, top}
	}
	return []int64{0, top}
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// hourLabels are the window's hours from start: every sixth labelled on
// the axis, each in full for the tooltips.
func hourLabels(start time.Time, hours int) (axis, full []string) {
	axis, full = make([]string, hours), make([]string, hours)
	for i := range hours {
		h := start.Add(time.Duration(i) * time.Hour).UTC()
		full[i] = h.Format("2006-01-02 15:00") + "Z"
		if i%6 == 0 || i == hours-1 {
			axis[i] = h.Format("15:00")
		}
	}
	return axis, full
}

// waitingOrder is the order of the queue chart's states.
var waitingOrder = []string{"available", "scheduled", "retryable", "pending", "running"}

// overviewCharts are the overview's charts of a and the queue's depth now.
func overviewCharts(a store.Activity, depth []store.QueueCount) []chart {
	hours := len(a.Issued)
	axis, full := hourLabels(a.Start, hours)
	span := fmt.Sprintf("in each hour from %s to %s", full[0], full[hours-1])
	var charts []chart
	charts = append(charts, barChart("issued", "Certificates issued", "per hour, UTC",
		fmt.Sprintf("Certificates issued %s: %d in all, at most %d in an hour.", span, sum(a.Issued), maxOf(a.Issued)),
		axis, full, []chartSeries{{"issued", "issued", a.Issued}}))
	charts = append(charts, barChart("validations", "Validations", "per hour, UTC",
		fmt.Sprintf("Challenges validated and failed %s: %d valid, %d invalid.", span, sum(a.Valid), sum(a.Invalid)),
		axis, full, []chartSeries{{"valid", "valid", a.Valid}, {"invalid", "invalid", a.Invalid}}))
	charts = append(charts, barChart("jobs", "Jobs finished", "per hour, UTC",
		fmt.Sprintf("Jobs finished %s: %d completed, %d discarded or cancelled.", span, sum(a.JobsCompleted), sum(a.JobsFailed)),
		axis, full, []chartSeries{{"completed", "completed", a.JobsCompleted}, {"failed", "failed", a.JobsFailed}}))
	byState := map[string]int64{}
	for _, r := range depth {
		byState[r.State] += r.Count
	}
	counts := make([]int64, len(waitingOrder))
	var desc []string
	for i, st := range waitingOrder {
		counts[i] = byState[st]
		desc = append(desc, fmt.Sprintf("%d %s", counts[i], st))
	}
	charts = append(charts, barChart("queue", "Queue now", "jobs",
		fmt.Sprintf("Jobs waiting or running now, by state: %s.", strings.Join(desc, ", ")),
		waitingOrder, waitingOrder, []chartSeries{{"jobs", "queued", counts}}))
	return charts
}

func sum(v []int64) (n int64) {
	for _, x := range v {
		n += x
	}
	return n
}

func maxOf(v []int64) (n int64) {
	for _, x := range v {
		n = max(n, x)
	}
	return n
}
